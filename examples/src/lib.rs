//! What the example programs share: serving an axum router on the address they are
//! given (`PORTERO_ADDR`, default `127.0.0.1:3000`; port 0 picks a free one), printing
//! `listening on http://ADDR` once bound, so a test (or a person) knows where to send
//! requests.
#![deny(missing_docs)]

use std::net::SocketAddr;

/// Serves `app` with each connection's peer address (what `ClientAddrLayer` reads) on
/// `PORTERO_ADDR`, until the process is stopped.
pub async fn serve(app: axum::Router) -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::var("PORTERO_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
