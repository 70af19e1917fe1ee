/**
 * The daemon's optional packages (the ACP SDK, the PostgreSQL driver) are loaded when the
 * configuration needs them; this says why one could not be.
 */

/** Why `packages` could not be loaded: not installed (and how to install them), or installed but failing to load. */
export const optionalPackageProblem = (packages: ReadonlyArray<string>, error: unknown): string => {
  const message = error instanceof Error ? error.message : String(error)
  const code = typeof error === "object" && error !== null && "code" in error ? error.code : undefined
  return code === "ERR_MODULE_NOT_FOUND"
    ? `needs the package${packages.length === 1 ? "" : "s"} ${packages.join(" and ")} (npm install ${packages.join(" ")}): ${message}`
    : `cannot load ${packages.join(" and ")}: ${message}`
}
