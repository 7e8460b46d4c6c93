package v2026

// Whether a 2026-07-28 upstream runs tasks itself: its server/discover
// answer lists the io.modelcontextprotocol/tasks extension. 2026-07-28 has
// no per-tool task mode on the wire (the server decides per call), so this
// is all the gateway can learn ahead: calls to such an upstream keep the
// extension declared, and an upstream CreateTaskResult becomes a followed
// task ([call.plainOnTaskRuntime]). The configuration's probe of the endpoint
// (wire.Probes, shared with the version bridge) asks it; an upstream that
// cannot be asked (down, refusing the caller) counts as not advertising
// it, and is asked again at the next call.
func (c *call) upstreamRunsTasks() bool {
	v, known := c.Probes.Verdict(c.R, c.Next)
	return known && !v.V2025 && v.TasksExtension
}
