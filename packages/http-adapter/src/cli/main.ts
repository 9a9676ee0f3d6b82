import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Effect } from "effect"
import { cliProgram } from "./program.js"

/** `pnpm cli ...`: exit status 0 on success, 1 on any failure (already reported by cliProgram). */
cliProgram(process.argv).pipe(Effect.provide(NodeServices.layer), NodeRuntime.runMain({ disableErrorReporting: true }))
