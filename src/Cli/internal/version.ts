// The package version `--version` prints: a constant, so the CLI reads no package.json at startup.
// test/Cli.test.ts checks it against package.json, so a release that bumps one without the other fails.

/**
 * The version of the runtime-resume package (as in package.json).
 *
 * @since 0.1.0
 * @category constants
 */
export const VERSION = "0.1.0"
