// The public `WorkspaceOwner` namespace: the workspace owner lock of docs/spec/04-continuation.md (shared for a running host, exclusive for
// repair and continuation execution, at most 2 s of waiting) and its layers over any `WorkspaceLock`.
export * from "./Services/WorkspaceOwner.js"
export { layer, layerNode, make } from "./Layers/NodeWorkspaceOwner.js"
