/**
 * The import boundaries of src/ (docs/architecture.md, "Boundaries"), checked in CI by
 * `npm run check:boundaries`. Floors, lowest first: domain, platform, services, api, layers,
 * programs and entries. A floor imports only floors below it (and packages).
 */
/** @type {import("dependency-cruiser").IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-cycles",
      comment: "No module imports itself back through others: a cycle joins two rooms into one.",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true }
    },
    {
      name: "domain-is-the-floor",
      comment: "The domain (data, schemas, typed errors) imports nothing of the project above it.",
      severity: "error",
      from: { path: "^src/domain/" },
      to: { path: "^src/", pathNot: "^src/domain/" }
    },
    {
      name: "platform-over-domain-only",
      comment: "The platform floor (procfs, process groups, ids) knows only the domain.",
      severity: "error",
      from: { path: "^src/platform/" },
      to: { path: "^src/", pathNot: "^src/(domain|platform)/" }
    },
    {
      name: "services-over-domain-only",
      comment: "Service tags and their interfaces name domain types only, never an implementation.",
      severity: "error",
      from: { path: "^src/services/" },
      to: { path: "^src/", pathNot: "^src/(domain|services)/" }
    },
    {
      name: "api-over-domain-only",
      comment: "The HTTP contract is shared by the server, the client, the hub and the cluster: no implementation in it.",
      severity: "error",
      from: { path: "^src/api/" },
      to: { path: "^src/", pathNot: "^src/(domain|api)/" }
    },
    {
      name: "layers-never-programs",
      comment: "Layers implement services; programs and entries compose them, never the other way.",
      severity: "error",
      from: { path: "^src/(layers|platform|services|api|domain)/" },
      to: { path: "^src/(programs|entries|index\\.ts)" }
    },
    {
      name: "production-never-test-doubles",
      comment: "Test doubles live under src/testing and are exported by quiesce/testing only.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/(testing|entries/testing\\.ts)" },
      to: { path: "^src/testing/" }
    },
    {
      name: "providers-stay-providers",
      comment: "A provider adapter speaks to its agent; it knows nothing of HTTP, the hub or the cluster.",
      severity: "error",
      from: { path: "^src/layers/providers/" },
      to: { path: "^src/(api|layers/(http|hub|cluster|registry|collector|retirement|delivery|finish))/" }
    },
    {
      name: "host-below-providers",
      comment: "The host layers (home, procfs, leftovers) are below the providers, never above them.",
      severity: "error",
      from: { path: "^src/layers/host/" },
      to: { path: "^src/layers/providers/" }
    },
    {
      name: "cluster-and-hub-not-through-the-server",
      comment: "The cluster and the hub share the contract (src/api), not the HTTP server's layers.",
      severity: "error",
      from: { path: "^src/layers/(cluster|hub)/" },
      to: { path: "^src/layers/http/" }
    }
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"] }
  }
}
