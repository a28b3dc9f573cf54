//! The zkdist binary: the roles on a real ensemble, the client commands, and
//! the demo on the embedded simulator.

mod args;
mod commands;
mod connect;
mod handlers;
mod shutdown;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use args::{Cli, Command};
use commands::Outcome;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&cli.log));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match execute(cli.command) {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        // A task that ran and failed is not an error of zkdist's, but a
        // script waiting for it must be able to tell.
        Ok(Outcome::TaskFailed) => ExitCode::from(2),
        Err(error) => {
            eprintln!("zkdist: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn execute(command: Command) -> anyhow::Result<Outcome> {
    if let Command::Demo(args) = &command {
        commands::demo::demo(args)?;
        return Ok(Outcome::Done);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        match &command {
            Command::Run(args) => commands::role::run(args).await.map(|()| Outcome::Done),
            Command::Master(args) => commands::role::master(args).await.map(|()| Outcome::Done),
            Command::Worker(args) => commands::role::worker(args).await.map(|()| Outcome::Done),
            Command::Submit(args) => commands::submit::submit(args).await,
            Command::Wait(args) => commands::submit::wait(args).await,
            Command::Status(args) => commands::status::status(args).await.map(|()| Outcome::Done),
            Command::Demo(_) => unreachable!("the demo runs on its own runtime"),
        }
    })
}
