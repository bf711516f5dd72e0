/**
 * Reading client options from the environment, with explicit options taking precedence.
 *
 * @internal
 */
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ClientOptions } from "./http.js"

/** The env name of the API key. */
export const API_KEY_ENV = "WANDB_API_KEY"

/** Fill `apiKey` and `baseUrl` from `WANDB_API_KEY` and `urlEnv` where the options leave them out. */
export const resolveOptions = <O extends ClientOptions>(
  options: O,
  urlEnv: string,
  defaultUrl: string
): Effect.Effect<O & { readonly baseUrl: string | URL }, ConfigError.ConfigError> =>
  Effect.gen(function* () {
    const apiKey = options.apiKey ?? Option.getOrUndefined(yield* Config.option(Config.redacted(API_KEY_ENV)))
    const baseUrl =
      options.baseUrl ?? Option.getOrElse(yield* Config.option(Config.nonEmptyString(urlEnv)), () => defaultUrl)
    return { ...options, apiKey, baseUrl }
  })
