// The public `WorkspaceLock` namespace: the OS-level lock service that dies with its holder, and its Node layers.
// The JSONL store takes it exclusively for writing; readers only probe it.
export * from "./Services/WorkspaceLock.js"
export { layer, layerNode, make } from "./Layers/NodeWorkspaceLock.js"
