/**
 * The example webhook receiver: `tsx packages/webhook-adapter/src/example-receiver.ts`.
 *
 * Environment: RECEIVER_SECRETS (comma-separated whsec_ secrets, required), RECEIVER_PORT
 * (default 8787; 0 picks a free port), RECEIVER_HOST (default 127.0.0.1), RECEIVER_API_BASE_URL
 * and RECEIVER_API_KEY (both or neither: the transcript follow-up fetch), RECEIVER_DATABASE_URL
 * (optional PostgreSQL idempotency store; in memory otherwise).
 *
 * stdout: one JSON line per verified event. stderr: the listening address and refusals.
 */
import { mainExampleReceiver } from "./receiver/example-receiver-main.js"

mainExampleReceiver()
