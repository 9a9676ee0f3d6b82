export * from "./generate-data.js"
