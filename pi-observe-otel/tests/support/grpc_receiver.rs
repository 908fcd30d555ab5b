//! An in-process OTLP/gRPC receiver on `127.0.0.1:0` (tonic server with the generated
//! `opentelemetry-proto` services) that accepts gzip and records every request with its
//! metadata, so tests can check compression and headers — which the fake collector does not
//! expose.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{LogsService, LogsServiceServer};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status};

/// One request as received: the signal's message and the request metadata (lowercase keys).
#[derive(Debug, Clone)]
pub enum Received {
    Traces(ExportTraceServiceRequest, BTreeMap<String, String>),
    Metrics(ExportMetricsServiceRequest, BTreeMap<String, String>),
    Logs(ExportLogsServiceRequest, BTreeMap<String, String>),
}

impl Received {
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        match self {
            Received::Traces(_, m) | Received::Metrics(_, m) | Received::Logs(_, m) => m,
        }
    }
}

#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<Received>>>);

fn metadata<T>(request: &Request<T>) -> BTreeMap<String, String> {
    request
        .metadata()
        .clone()
        .into_headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("<binary>").to_owned()))
        .collect()
}

/// Each service records its request with the metadata and answers success.
macro_rules! recording_service {
    ($service:ident, $request:ty, $response:ty, $variant:ident) => {
        #[tonic::async_trait]
        impl $service for Log {
            async fn export(&self, request: Request<$request>) -> Result<Response<$response>, Status> {
                let meta = metadata(&request);
                self.0.lock().unwrap().push(Received::$variant(request.into_inner(), meta));
                Ok(Response::new(<$response>::default()))
            }
        }
    };
}

recording_service!(TraceService, ExportTraceServiceRequest, ExportTraceServiceResponse, Traces);
recording_service!(MetricsService, ExportMetricsServiceRequest, ExportMetricsServiceResponse, Metrics);
recording_service!(LogsService, ExportLogsServiceRequest, ExportLogsServiceResponse, Logs);

/// The running receiver; it stops with the runtime it was started on.
pub struct GrpcReceiver {
    pub endpoint: String,
    log: Log,
}

impl GrpcReceiver {
    /// Starts the receiver on `runtime`, accepting gzip-compressed requests.
    pub fn start(runtime: &tokio::runtime::Runtime) -> GrpcReceiver {
        Self::serve(runtime, None)
    }

    /// Like [`GrpcReceiver::start`], over TLS with the fixture server certificate, requiring a
    /// client certificate signed by the fixture CA (mutual TLS).
    pub fn start_tls(runtime: &tokio::runtime::Runtime) -> GrpcReceiver {
        use tonic::transport::{Certificate, Identity, ServerTlsConfig};
        let fixture =
            |name: &str| std::fs::read(format!("{}/tests/fixtures/tls/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let tls = ServerTlsConfig::new()
            .identity(Identity::from_pem(fixture("server.pem"), fixture("server.key")))
            .client_ca_root(Certificate::from_pem(fixture("ca.pem")));
        Self::serve(runtime, Some(tls))
    }

    fn serve(runtime: &tokio::runtime::Runtime, tls: Option<tonic::transport::ServerTlsConfig>) -> GrpcReceiver {
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let endpoint = format!("{scheme}://{}", listener.local_addr().unwrap());
        let log = Log::default();
        let mut server = tonic::transport::Server::builder();
        if let Some(tls) = tls {
            server = server.tls_config(tls).unwrap();
        }
        let router = server
            .add_service(TraceServiceServer::new(log.clone()).accept_compressed(CompressionEncoding::Gzip))
            .add_service(MetricsServiceServer::new(log.clone()).accept_compressed(CompressionEncoding::Gzip))
            .add_service(LogsServiceServer::new(log.clone()).accept_compressed(CompressionEncoding::Gzip));
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        runtime.spawn(router.serve_with_incoming(incoming));
        GrpcReceiver { endpoint, log }
    }

    /// Everything received so far.
    pub fn received(&self) -> Vec<Received> {
        self.log.0.lock().unwrap().clone()
    }
}
