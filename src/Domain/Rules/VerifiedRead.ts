// A store's verified read of one run, handed over with its verifier (docs/spec/02-resume-plan.md, "Input"): the planner
// that runs such a read takes the reader's tail and call index as its own instead of building a second one.
import type * as Stream from "effect/Stream"
import type { RunVerifier } from "./RunVerifier.js"

/**
 * The same read again, whose reader hands its verifier to `onVerifier` when it starts (before its first row) and
 * marks no row (its one consumer shares the verifier itself).
 *
 * @since 0.1.0
 * @category models
 */
export type Follow<A, E, R> = (onVerifier: (verifier: RunVerifier) => void) => Stream.Stream<A, E, R>

// Keyed by the stream object a store returned: a stream transformed by its consumer is another object, so it is
// never mistaken for the store's own read (the planner then verifies as for any stream).
const reads = new WeakMap<object, Follow<unknown, unknown, unknown>>()

/**
 * Registers `stream` (a store's verified read of one run, every row in seq order from seq 1) with the way to run
 * it followed; returns `stream`.
 *
 * @since 0.1.0
 * @category rules
 */
export const register = <A, E, R>(stream: Stream.Stream<A, E, R>, follow: Follow<A, E, R>): Stream.Stream<A, E, R> => {
  reads.set(stream, follow as Follow<unknown, unknown, unknown>)
  return stream
}

/**
 * The followed form of `stream`, when it is a store's own verified read (`register`).
 *
 * @since 0.1.0
 * @category rules
 */
export const followOf = <A, E, R>(stream: Stream.Stream<A, E, R>): Follow<A, E, R> | undefined =>
  reads.get(stream) as Follow<A, E, R> | undefined

// A store's one-pass scan of several runs, keyed as `reads` is (a transformed stream is another object).
const scans = new WeakMap<object, Follow<unknown, unknown, unknown>>()

/**
 * Registers `stream` (a store's verified scan of several runs, each run's rows in seq order from seq 1) with the way
 * to run it followed: the followed scan hands each run's verifier (its `runId` says whose) to `onVerifier` before that
 * run's first row, and marks no row. Returns `stream`.
 *
 * @since 0.1.0
 * @category rules
 */
export const registerScan = <A, E, R>(stream: Stream.Stream<A, E, R>, follow: Follow<A, E, R>): Stream.Stream<A, E, R> => {
  scans.set(stream, follow as Follow<unknown, unknown, unknown>)
  return stream
}

/**
 * The followed form of `stream`, when it is a store's own verified scan (`registerScan`).
 *
 * @since 0.1.0
 * @category rules
 */
export const scanFollowOf = <A, E, R>(stream: Stream.Stream<A, E, R>): Follow<A, E, R> | undefined =>
  scans.get(stream) as Follow<A, E, R> | undefined
