/** Vitest hooks for a PostgreSQL server per test file (see `postgres.ts`). */
import { afterAll, beforeAll } from "vitest"
import { type PostgresServer, startPostgres } from "./postgres.ts"

/**
 * One server for the test file that calls this (started before its tests, stopped after them),
 * and a fresh database per call of `database`.
 */
export const usePostgres = () => {
  let server: PostgresServer | undefined
  let databases = 0
  beforeAll(async () => {
    server = await startPostgres()
  }, 60_000)
  afterAll(async () => {
    await server?.stop()
  })
  const current = () => {
    if (server === undefined) throw new Error("the PostgreSQL server has not started")
    return server
  }
  return {
    server: current,
    /** A new, empty database; its URL. */
    database: (prefix = "test") => current().createDatabase(`${prefix}_${++databases}`)
  }
}
