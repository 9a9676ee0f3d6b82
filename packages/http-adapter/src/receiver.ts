/**
 * `pnpm receiver`: the example webhook receiver of packages/webhook-adapter, with its
 * follow-up fetch made through the typed client (the composition root is the one place that
 * knows both adapters). Configuration as in packages/webhook-adapter/src/example-receiver.ts.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { mainExampleReceiver } from "@clinical-api/webhook-adapter"
import { Effect } from "effect"
import { makePublicApiClient } from "./client.js"

mainExampleReceiver((api) => (event) =>
  Effect.gen(function*() {
    const client = yield* makePublicApiClient({ baseUrl: api.baseUrl.href.replace(/\/+$/, ""), apiKey: api.apiKey })
    yield* client.getPublicDocumentTranscript(event.resources.encounter_id, event.resources.document_id)
    return "ok"
  }).pipe(
    Effect.catch((failure) => Effect.succeed(
      failure._tag === "PublicApiClientError" ? `http_${failure.status}_${failure.reason_code}` : "network_error"
    )),
    Effect.timeoutOrElse({ duration: "15 seconds", orElse: () => Effect.succeed("timeout") }),
    Effect.provide(NodeHttpClient.layerUndici)
  ))
