// Package badgerstore is the task store on an embedded Badger database: the
// default backend, for one Caddy process, no setup. It implements
// task.Store with task.AdminLister and task.StatsReporter,
// and value-log garbage collection after sweeps (CollectGarbage).
package badgerstore
