// `runtime-resume/ai`: drop-in durability for @effect/ai hosts (issue 15), behind its own entry point so that hosts
// which do not use @effect/ai never load it (nothing in src/index.ts imports this file or @effect/ai).
export {}
