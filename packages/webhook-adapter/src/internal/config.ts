import { Config, Effect, Result, Schema, SchemaIssue } from "effect"

/** An invalid configuration whose message is exactly `message` (which must never quote a secret). */
export const invalidConfig = (message: string): Config.ConfigError =>
  new Config.ConfigError(new Schema.SchemaError(new SchemaIssue.InvalidValue({ message })))

/**
 * Checks and converts a present value: a `Failure` is an invalid configuration with that message.
 * An absent value stays absent, so `Config.withDefault` and `Config.option` still apply.
 */
export const refine =
  <A, B>(parse: (value: A) => Result.Result<B, string>) =>
  (self: Config.Config<A>): Config.Config<B> =>
    Config.mapEffect(self, (value) => Effect.fromResult(Result.mapError(parse(value), invalidConfig)))

/** The message of a configuration error, for a person: the reason, without the `ConfigError(...)` wrapping. */
export const configErrorMessage = (error: Config.ConfigError): string => error.cause.message
