import { configDefaults, defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The real-CLI tests run with `npm run test:agents` (vitest.agents.config.ts).
    exclude: [...configDefaults.exclude, "test/agents/**"],
    // Tests run real child processes; none may survive a test file.
    teardownTimeout: 10_000,
    // Tests are quiet unless they fail: what a test logs (Effect's logger, console) is shown only
    // for a test that fails (`npx vitest run --silent=false …` shows every test's).
    silent: "passed-only"
  }
})
