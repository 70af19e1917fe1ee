/**
 * The bounded windows of recent events, one per agent and one of every agent's (the daemon-wide
 * stream, `GET /v1/events`, under the same limits), that readers of the live event streams read
 * from. Events are numbered from one sequence for the whole process, so numbers increase per
 * agent and on the daemon-wide window; a number means something only to the process that issued
 * it (an event's id carries the process's epoch beside it, `<epoch>-<n>`). A reader keeps only its
 * position: nothing is queued per reader, so however many read, and however slowly, memory stays
 * what the windows hold. A reader whose position fell out of its window (a reconnect too old, a
 * reader too slow) gets a `gap` and continues from the oldest kept.
 */
import type { AgentEvent, NumberedEvent } from "../../domain/agentEvent.ts"

/** An event as a window keeps it: its number in this process (the `n` of its id), and as it is sent (made once, for every reader). */
export interface WindowEvent {
  readonly id: number
  readonly sent: NumberedEvent
}

/** How much each agent's window keeps, and for how long an unread window outlives its last event. */
export interface WindowLimits {
  /** The most events kept per agent. */
  readonly maxEvents: number
  /** The most bytes (of the events' JSON) kept per agent; the newest event is always kept. */
  readonly maxBytes: number
  /** A window no one reads is dropped this long (ms) after its last event. */
  readonly idleRetentionMs: number
}

/** The defaults: 1,000 events or 1 MiB per agent, an unread window kept 10 minutes. */
export const defaultWindowLimits: WindowLimits = { maxEvents: 1_000, maxBytes: 1024 * 1024, idleRetentionMs: 10 * 60_000 }

interface Kept {
  readonly numbered: WindowEvent
  readonly bytes: number
}

/** One agent's window. */
interface AgentWindow {
  readonly kept: Array<Kept>
  /** Index of the oldest kept event in `kept` (dropping from the front without copying). */
  head: number
  bytes: number
  /** The highest id this window dropped, or that was issued before it existed: a reader at or past it missed nothing. */
  droppedThrough: number
  readers: number
  lastAppendAt: number
}

/** What a reader at a position reads next: a gap if it missed events, then the events after it. */
export interface WindowRead {
  /** Set when events after the reader's position left the window before it read them. */
  readonly gap?: { readonly after: number; readonly resumesAt: number } | undefined
  readonly events: ReadonlyArray<WindowEvent>
  /** The reader's position after these events. */
  readonly position: number
}

/** Every agent's window (see the module's comment). Synchronous and single-threaded: the caller serialises nothing. */
export class EventWindows {
  private readonly windows = new Map<string, AgentWindow>()
  private next: number
  /** The highest id of any window dropped whole: a window made later starts past it. */
  private forgottenThrough: number
  private lastSweepAt = 0
  private readonly limits: WindowLimits
  /** Every agent's events, each with its agent's id: what the daemon-wide stream reads. */
  private readonly everyAgent: AgentWindow
  private readonly epoch: string

  /** Numbers start from 1; an event's id is `<epoch>-<n>`, the epoch naming this process. */
  constructor(limits: WindowLimits = defaultWindowLimits, epoch = "0") {
    this.limits = limits
    this.epoch = epoch
    this.next = 1
    this.forgottenThrough = 0
    this.everyAgent = this.emptyWindow()
  }

  /** The last id issued (for any agent): a new reader starts here and sees what comes next. */
  latest(): number {
    return this.next - 1
  }

  /** Appends an agent's event at `now` (ms), dropping the oldest past the limits; returns its id. */
  append(agentId: string, event: AgentEvent, now: number): number {
    this.sweep(now)
    const id = this.next++
    const bytes = JSON.stringify(event).length
    const sentId = this.idOf(id)
    this.keep(this.windowOf(agentId), { id, sent: { id: sentId, event } }, bytes, now)
    // The daemon-wide copy names its agent (and counts the id's bytes too, so its bound holds).
    this.keep(this.everyAgent, { id, sent: { id: sentId, event, agentId } }, bytes + agentId.length, now)
    return id
  }

  /**
   * What a reader of the agent at `position` (the last id it read) reads now: a gap when events
   * after it were dropped (or `position` is not one this daemon issued), then every kept event after
   * it, in order, at most `max`.
   */
  read(agentId: string, position: number, max: number): WindowRead {
    const window = this.windows.get(agentId)
    return this.readWindow(window, window?.droppedThrough ?? this.forgottenThrough, position, max)
  }

  /** What a reader of every agent's events at `position` reads now, as `read` does for one agent; each event names its agent. */
  readEveryAgent(position: number, max: number): WindowRead {
    return this.readWindow(this.everyAgent, this.everyAgent.droppedThrough, position, max)
  }

  /** A reader of the agent begins; its window is kept while anyone reads it. */
  addReader(agentId: string): void {
    this.windowOf(agentId).readers++
  }

  /** A reader of the agent ends. */
  removeReader(agentId: string): void {
    const window = this.windows.get(agentId)
    if (window !== undefined) window.readers--
  }

  /** The agent is gone (deleted): its window goes, readers or not. */
  forget(agentId: string): void {
    const window = this.windows.get(agentId)
    if (window === undefined) return
    this.windows.delete(agentId)
    this.forgottenThrough = Math.max(this.forgottenThrough, this.latest())
  }

  /** What the windows hold: agents, and the events and bytes of theirs and of the daemon-wide one (for tests and metrics). */
  size(): { readonly agents: number; readonly events: number; readonly bytes: number } {
    let events = 0
    let bytes = 0
    for (const window of [...this.windows.values(), this.everyAgent]) {
      events += window.kept.length - window.head
      bytes += window.bytes
    }
    return { agents: this.windows.size, events, bytes }
  }

  private windowOf(agentId: string): AgentWindow {
    let window = this.windows.get(agentId)
    if (window === undefined) {
      window = this.emptyWindow()
      this.windows.set(agentId, window)
    }
    return window
  }

  /** The id of number `n`: `<epoch>-<n>`. */
  idOf(n: number): string {
    return `${this.epoch}-${n}`
  }

  private emptyWindow(): AgentWindow {
    return { kept: [], head: 0, bytes: 0, droppedThrough: this.forgottenThrough, readers: 0, lastAppendAt: 0 }
  }

  /** Keeps an event in a window, dropping its oldest past the limits (the newest is always kept). */
  private keep(window: AgentWindow, numbered: WindowEvent, bytes: number, now: number): void {
    window.kept.push({ numbered, bytes })
    window.bytes += bytes
    window.lastAppendAt = now
    while (
      window.kept.length - window.head > 1 &&
      (window.kept.length - window.head > this.limits.maxEvents || window.bytes > this.limits.maxBytes)
    ) {
      const dropped = window.kept[window.head++]!
      window.bytes -= dropped.bytes
      window.droppedThrough = dropped.numbered.id
    }
    // Compact now and then, so the array does not keep what it dropped.
    if (window.head > 64 && window.head * 2 > window.kept.length) {
      window.kept.splice(0, window.head)
      window.head = 0
    }
  }

  /** A gap when events after `position` left `window` (or `position` was never issued), then what is kept after it. */
  private readWindow(window: AgentWindow | undefined, droppedThrough: number, position: number, max: number): WindowRead {
    let from = position
    let gap: WindowRead["gap"]
    if (position < droppedThrough || position > this.latest()) {
      from = droppedThrough
      const oldest = window !== undefined && window.head < window.kept.length ? window.kept[window.head]!.numbered.id : this.next
      gap = { after: position, resumesAt: oldest }
    }
    const events: Array<WindowEvent> = []
    if (window !== undefined) {
      // Ids are kept in increasing order: find the first after `from` by bisection, not by a scan.
      let low = window.head
      let high = window.kept.length
      while (low < high) {
        const middle = (low + high) >>> 1
        if (window.kept[middle]!.numbered.id > from) high = middle
        else low = middle + 1
      }
      for (let i = low; i < window.kept.length && events.length < max; i++) events.push(window.kept[i]!.numbered)
    }
    const last = events.at(-1)
    return { gap, events, position: last !== undefined ? last.id : gap !== undefined ? gap.resumesAt - 1 : from }
  }

  /** Drops the windows no one reads whose last event is older than the retention (at most once a minute). */
  private sweep(now: number): void {
    if (now - this.lastSweepAt < 60_000) return
    this.lastSweepAt = now
    for (const [agentId, window] of this.windows) {
      if (window.readers <= 0 && now - window.lastAppendAt > this.limits.idleRetentionMs) {
        this.windows.delete(agentId)
        this.forgottenThrough = Math.max(this.forgottenThrough, this.latest())
      }
    }
  }
}
