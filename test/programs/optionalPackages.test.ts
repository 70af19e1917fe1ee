import { describe, expect, it } from "@effect/vitest"
import { optionalPackageProblem } from "../../src/programs/optionalPackages.ts"

describe("optionalPackageProblem", () => {
  it("says how to install a package that is not installed", () => {
    const missing = Object.assign(new Error("Cannot find package '@effect/sql-pg'"), { code: "ERR_MODULE_NOT_FOUND" })
    expect(optionalPackageProblem(["@effect/sql-pg"], missing)).toBe(
      "needs the package @effect/sql-pg (npm install @effect/sql-pg): Cannot find package '@effect/sql-pg'"
    )
    expect(optionalPackageProblem(["@agentclientprotocol/sdk", "zod"], missing)).toContain(
      "needs the packages @agentclientprotocol/sdk and zod (npm install @agentclientprotocol/sdk zod)"
    )
  })

  it("does not tell to install a package that is installed but fails to load", () => {
    const broken = new SyntaxError("The requested module 'zod' does not provide an export named 'z'")
    expect(optionalPackageProblem(["@agentclientprotocol/sdk", "zod"], broken)).toBe(
      "cannot load @agentclientprotocol/sdk and zod: The requested module 'zod' does not provide an export named 'z'"
    )
  })
})
