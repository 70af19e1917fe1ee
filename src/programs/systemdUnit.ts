/**
 * The systemd user unit `quiesce daemon --print-systemd-unit` prints (H1, H3): `Type=notify`, so
 * systemd counts the daemon started only once it is ready; `KillMode=mixed`, so a stop signals
 * the daemon alone and it closes its agents' runtimes in order (resumably) before systemd ends
 * whatever is left; and a stop timeout beyond the daemon's own shutdown deadline, so systemd
 * never kills a shutdown the daemon would have finished.
 */
import { retiredExitCode } from "../domain/retirement.ts"

export interface SystemdUnitOptions {
  /** The Node.js that runs the CLI. */
  readonly node: string
  /** Flags of that Node, before the script. */
  readonly nodeFlags?: ReadonlyArray<string> | undefined
  /** The CLI's entry script. */
  readonly cli: string
  readonly home: string
  /** The daemon's shutdown deadline, from its configuration. */
  readonly shutdownDeadlineMillis: number
  /** The PATH the daemon looks provider commands up on (a user unit's own is minimal). */
  readonly path: string | undefined
}

/** How far beyond the daemon's deadline systemd waits before it kills what is left. */
export const stopTimeoutMarginSeconds = 10

/** `%` starts a specifier in every unit setting; doubled, it is itself. */
const escapeSpecifiers = (text: string) => text.replace(/%/g, "%%")

/**
 * One word of `ExecStart=`, or the whole of an `Environment=` assignment, quoted the way systemd
 * reads it: specifiers (`%h`) escaped everywhere, and in a command line `$` too (systemd
 * substitutes `$VAR` and `${VAR}` there, not in `Environment=`).
 */
export const systemdQuote = (word: string, where: "command" | "assignment" = "command"): string => {
  const escaped = escapeSpecifiers(where === "command" ? word.replace(/\$/g, "$$$$") : word)
  return /^[A-Za-z0-9_@+=:,./-]+$/.test(word) ? escaped : `"${escaped.replace(/\\/g, "\\\\").replace(/"/g, "\\\"")}"`
}

export const systemdUnit = (options: SystemdUnitOptions): string => {
  const stopSeconds = Math.ceil(options.shutdownDeadlineMillis / 1000) + stopTimeoutMarginSeconds
  const lines = [
    "# A systemd user unit for Quiesce's daemon of one home. Install it with:",
    "#   quiesce daemon --print-systemd-unit > ~/.config/systemd/user/quiesce.service",
    "#   systemctl --user daemon-reload && systemctl --user enable --now quiesce",
    "[Unit]",
    `Description=${escapeSpecifiers(`Quiesce daemon (${options.home})`)}`,
    "",
    "[Service]",
    "Type=notify",
    // READY=1 is sent by systemd-notify, a child of the daemon.
    "NotifyAccess=all",
    `ExecStart=${[options.node, ...(options.nodeFlags ?? []), options.cli, "--home", options.home, "daemon"].map((word) => systemdQuote(word)).join(" ")}`,
    ...(options.path === undefined ? [] : [`Environment=${systemdQuote(`PATH=${options.path}`, "assignment")}`]),
    "KillMode=mixed",
    `TimeoutStopSec=${stopSeconds}`,
    "Restart=on-failure",
    // A daemon that retired itself stopped on purpose: not a failure, and not restarted.
    `SuccessExitStatus=${retiredExitCode}`,
    "",
    "[Install]",
    "WantedBy=default.target",
    ""
  ]
  return lines.join("\n")
}
