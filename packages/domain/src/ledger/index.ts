export * from "./canonical.js"
export * from "./chain.js"
export * from "./seal.js"
