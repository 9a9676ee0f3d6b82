import { UnitOfWork } from "@clinical-api/domain"
import { Effect, Layer } from "effect"
import { PgClient } from "../sql/pg-client.js"

/** Units of work as members of group transactions, committed together (see `PgClient.groupTransactionally`). */
export const UnitOfWorkLive = Layer.effect(
  UnitOfWork,
  Effect.map(PgClient, (client) => UnitOfWork.of({ transactionally: client.groupTransactionally }))
)
