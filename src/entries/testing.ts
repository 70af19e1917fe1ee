/**
 * Test doubles for hosts' own tests: a scripted in-memory provider, and fake runtimes and caller
 * protection to drive the collector under `TestClock`.
 *
 * @module
 */
export { type Delivery, MemoryProvider, providerRegistryWith } from "../testing/MemoryProvider.ts"
export { FakeCallerProtection, FakeRuntime, FakeRuntimes } from "../testing/FakeRuntimes.ts"
