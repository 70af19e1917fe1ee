import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Tests run real child processes; none may survive a test file.
    teardownTimeout: 10_000
  }
})
