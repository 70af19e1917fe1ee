/**
 * Test doubles for hosts' own tests: a scripted in-memory provider, and fake runtimes and caller
 * protection to drive the collector under `TestClock`.
 *
 * @module
 */
export { type Delivery, MemoryProvider, providerRegistryWith } from "../layers/providers/memory/MemoryProvider.ts"
export { FakeCallerProtection, FakeRuntime, FakeRuntimes } from "../layers/collector/RuntimeCandidatesTest.ts"
