//! zkdist master.
