// How the harnesses start a child script that sits beside them: `node --import tsx X.ts` when they run from the
// sources (tests, `npm run harness`), plain `node X.js` when they run compiled from dist/esm (the installed CLI).
import { fileURLToPath } from "node:url"

/** True when `from` (an `import.meta.url`) is a compiled module, not a TypeScript source run through tsx. */
export const isCompiled = (from: string): boolean => !from.endsWith(".ts")

/**
 * The argv (executable first) that runs the child script `name` (without extension) found beside the module `from`
 * (its `import.meta.url`). From the sources, Node resolves `--import tsx` from the working directory: the project root.
 */
export const childArgv = (from: string, name: string): readonly [string, ...Array<string>] => {
  const compiled = isCompiled(from)
  const file = fileURLToPath(new URL(`./${name}.${compiled ? "js" : "ts"}`, from))
  return compiled ? [process.execPath, file] : [process.execPath, "--import", "tsx", file]
}
