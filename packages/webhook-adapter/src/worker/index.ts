export * from "./config.js"
export * from "./delivery-worker.js"
export * from "./endpoint-guard.js"
