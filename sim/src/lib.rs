//! SimZk: see README.
