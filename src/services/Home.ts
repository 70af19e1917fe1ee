/**
 * A daemon's home directory (H1, H2): the files it keeps there and its API token. One writing
 * daemon owns a home at a time; the layer that opens and locks it is `layers/host/Home.ts`.
 *
 * @module
 */
import { Context, type Effect, Schema } from "effect"

/** The home directory could not be used: locked by another daemon, unreadable, or its token file unusable. */
export class HomeUnavailable extends Schema.TaggedError<HomeUnavailable>()("HomeUnavailable", {
  home: Schema.String,
  message: Schema.String
}) {}

/** Where one daemon keeps everything; only one writing daemon owns it at a time (H2). */
export class Home extends Context.Service<Home, {
  readonly root: string
  readonly databaseFile: string
  readonly configFile: string
  readonly tokenFile: string
  readonly pluginHome: string
  /** The API token, created on first start. */
  readonly token: string
  /**
   * Marks the opening done (H1). Until then, closing the home (a failed or interrupted start)
   * removes what this start created in it: the token, the database and its journal files, an
   * empty `plugins/`. From then on everything is kept.
   */
  readonly opened: Effect.Effect<void>
}>()("quiesce/host/Home") {}
