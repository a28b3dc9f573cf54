//! zkdist's measurements.
//!
//! - [`simulated`]: the workloads of the criterion benchmarks (`cargo bench
//!   -p zkdist-benches`): assignment throughput, draining a backlog, and
//!   the explorer's standard run, all on the simulator.
//! - [`ensemble`]: what `zkdist bench` measures on a real ensemble (the raw
//!   write ceiling of the server, a backlog, a stream of tasks, writes per
//!   task, the efficiency), written against the coordination trait so the
//!   simulator runs it too.
//! - [`workload`]: the measured phases both share; [`system`]: a master and
//!   workers with a handler that does nothing; [`counting`]: a session
//!   wrapper that counts the requests each kind of actor sends.

pub mod counting;
pub mod ensemble;
pub mod raw;
pub mod simulated;
pub mod system;
pub mod workload;

pub use counting::{Counted, OpCounter, OpCounts};
pub use ensemble::{BacklogReport, BenchConfig, BenchError, BenchReport, TakeoverReport};
pub use raw::{MULTI_READ_NODES, RawCeiling, RawError};
pub use system::{NoopHandler, System, SystemError};
pub use workload::{NoProgress, PhaseReport, Progress, WorkloadError};
