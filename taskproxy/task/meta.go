package task

// MetaRelatedTask is the _meta key that names the task a message belongs
// to (2025-11-25 related-task metadata).
const MetaRelatedTask = "io.modelcontextprotocol/related-task"
