// Words a Schema decode failure for a typed error's message without any value from the input: it names the paths and
// what each expected, never what was there (Schema's own formatters print "actual <value>": a prompt, an argument).
import * as ParseResult from "effect/ParseResult"

/** How many problems a message names at most. */
const MAX_ISSUES = 5

type Issue = ParseResult.ParseIssue

const pathText = (path: ReadonlyArray<PropertyKey>): string =>
  path.length === 0 ? "the value" : path.map((key) => typeof key === "number" ? `[${key}]` : `[${JSON.stringify(String(key))}]`).join("")

// The schema side of an issue (its AST, printed from the schema, never from the input).
const expected = (ast: { toString(): string }): string => {
  const text = String(ast)
  return text.length > 120 ? `${text.slice(0, 117)}...` : text
}

const collect = (issue: Issue, path: ReadonlyArray<PropertyKey>, out: Array<string>): void => {
  if (out.length >= MAX_ISSUES) return
  switch (issue._tag) {
    case "Pointer": {
      const more = Array.isArray(issue.path) ? issue.path : [issue.path]
      collect(issue.issue, [...path, ...more], out)
      return
    }
    case "Composite": {
      const issues = Array.isArray(issue.issues) ? issue.issues : [issue.issues]
      for (const inner of issues as ReadonlyArray<Issue>) collect(inner, path, out)
      return
    }
    case "Refinement":
      if (issue.kind === "From") collect(issue.issue, path, out)
      else out.push(`${pathText(path)}: expected ${expected(issue.ast)}`)
      return
    case "Transformation":
      collect(issue.issue, path, out)
      return
    case "Type":
      out.push(`${pathText(path)}: expected ${expected(issue.ast)}`)
      return
    case "Missing":
      out.push(`${pathText(path)}: is missing`)
      return
    case "Unexpected":
      out.push(`${pathText(path)}: is not expected here`)
      return
    case "Forbidden":
      out.push(`${pathText(path)}: is forbidden`)
      return
  }
}

/**
 * The paths of a decode failure and what each expected, e.g. `["body"]["text"]: expected string`. Never a value
 * from the input: typed errors carrying this reach terminals and hosts' logs.
 *
 * @since 0.1.0
 * @category models
 */
export const describeParseError = (error: ParseResult.ParseError | Issue): string => {
  const issue = ParseResult.isParseError(error) ? error.issue : error
  const out: Array<string> = []
  collect(issue, [], out)
  return out.length === 0 ? "the value does not fit the schema" : out.join("; ")
}
