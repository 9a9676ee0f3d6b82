import { UnitOfWork } from "@clinical-api/domain"
import { Effect, Layer } from "effect"
import { PgClient } from "../sql/pg-client.js"

/** One PostgreSQL transaction per unit of work (see `PgClient.transactionally`). */
export const UnitOfWorkLive = Layer.effect(
  UnitOfWork,
  Effect.map(PgClient, (client) => UnitOfWork.of({ transactionally: client.transactionally }))
)
