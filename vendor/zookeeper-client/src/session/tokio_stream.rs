//! A TCP stream driven by tokio's reactor (zkdist's patch, see PATCHES.md).
//!
//! Upstream reads and writes through `async-net`, whose reactor runs on a
//! thread of its own: every readiness change crosses threads (a futex wake
//! per reply), and every read that would block re-arms a one-shot epoll
//! registration. A stream registered with the tokio runtime the session task
//! already runs on is polled by that runtime's own driver. The socket also
//! gets `TCP_NODELAY`: requests are small and pipelined, and Nagle's
//! algorithm would hold each one back until the previous one is
//! acknowledged.

use std::io::{IoSlice, Result};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::io::{AsyncRead, AsyncWrite};
use tokio::io::{AsyncRead as TokioAsyncRead, AsyncWrite as TokioAsyncWrite, ReadBuf};
use tokio::net::TcpStream;

#[derive(Debug)]
pub struct TokioTcpStream {
    stream: TcpStream,
}

impl TokioTcpStream {
    /// Connects to `host:port` with `TCP_NODELAY` set. Must be called within
    /// a tokio runtime with I/O enabled.
    pub async fn connect(host: &str, port: u16) -> Result<Self> {
        let stream = TcpStream::connect((host, port)).await?;
        stream.set_nodelay(true)?;
        Ok(Self { stream })
    }
}

impl AsyncRead for TokioTcpStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<Result<usize>> {
        let mut read_buf = ReadBuf::new(buf);
        match Pin::new(&mut self.get_mut().stream).poll_read(cx, &mut read_buf) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(read_buf.filled().len())),
            Poll::Ready(Err(err)) => Poll::Ready(Err(err)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for TokioTcpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    /// Forwarded, so that the pipelined requests queued in the depot leave
    /// in one `writev` rather than one `send` each.
    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
