export * from "./audio-storage-from-config.js"
export * from "./s3-audio-storage.js"
