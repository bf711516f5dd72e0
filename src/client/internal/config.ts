/**
 * Reading client options from the environment, with explicit options taking precedence.
 *
 * @internal
 */
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type { ClientOptions } from "./http.js"

/** The env name of the API key. */
export const API_KEY_ENV = "WANDB_API_KEY"

/** A setting of the environment; an empty one (`NAME=`, or only spaces) counts as unset, as if it were absent. */
export const setting = (name: string): Config.Config<Option.Option<string>> =>
  Config.option(Config.string(name)).pipe(Config.map(Option.filter((value) => value.trim() !== "")))

/** A secret setting of the environment (`Redacted`, never logged); an empty one counts as unset. */
export const secretSetting = (name: string): Config.Config<Option.Option<Redacted.Redacted<string>>> =>
  Config.option(Config.redacted(name)).pipe(Config.map(Option.filter((value) => Redacted.value(value).trim() !== "")))

/** Fill `apiKey` and `baseUrl` from `WANDB_API_KEY` and `urlEnv` where the options leave them out. */
export const resolveOptions = <O extends ClientOptions>(
  options: O,
  urlEnv: string,
  defaultUrl: string
): Effect.Effect<O & { readonly baseUrl: string | URL }, ConfigError.ConfigError> =>
  Effect.gen(function* () {
    const apiKey = options.apiKey ?? Option.getOrUndefined(yield* secretSetting(API_KEY_ENV))
    const baseUrl = options.baseUrl ?? Option.getOrElse(yield* setting(urlEnv), () => defaultUrl)
    return { ...options, apiKey, baseUrl }
  })
