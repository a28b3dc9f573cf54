//! Standard output, written without panicking. `println!` panics when
//! standard output cannot be written (a pipe whose reader has gone, a full
//! disk); these return an error naming it instead, so that a script that
//! reads task ids there hears that they were not all written. Messages to
//! standard error go through [`errln!`], which drops what cannot be
//! written: `eprintln!` would panic on a terminal that hung up, which is
//! just when a signal handler has something to say.

use std::fmt;
use std::io::{self, Write};

use anyhow::Context;

/// `args`, as `print!` writes them.
pub fn write(args: fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.flush())
        .context("cannot write to standard output")
}

/// `args` and a newline, as `println!` writes them.
pub fn write_line(args: fmt::Arguments<'_>) -> anyhow::Result<()> {
    write(format_args!("{args}\n"))
}

/// `print!`, returning an error rather than panicking (see [`write()`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write(format_args!($($arg)*))
    };
}

/// `println!`, returning an error rather than panicking (see
/// [`write_line`]).
macro_rules! outln {
    () => {
        $crate::stdout::write_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write_line(format_args!($($arg)*))
    };
}

/// `args` and a newline to standard error, dropped if they cannot be
/// written.
pub fn write_error_line(args: fmt::Arguments<'_>) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(format_args!("{args}\n"));
}

/// `eprintln!`, without its panic (see [`write_error_line`]).
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::stdout::write_error_line(format_args!($($arg)*))
    };
}

pub(crate) use {errln, out, outln};
