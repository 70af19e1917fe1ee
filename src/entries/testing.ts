/**
 * Test doubles for hosts' own tests: a scripted in-memory provider, fake runtimes and caller
 * protection to drive the collector under `TestClock`, and the daemon's API on a loopback test port.
 *
 * @module
 */
export { type Delivery, MemoryProvider, providerRegistryWith } from "../testing/MemoryProvider.ts"
export { FakeCallerProtection, FakeRuntime, FakeRuntimes } from "../testing/FakeRuntimes.ts"
export * as TestApiServer from "../testing/TestApiServer.ts"
