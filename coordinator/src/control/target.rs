//! Where a command's runs go: a local cluster started for the command, or the serving
//! coordinator `--coordinator` names. `run` and `sweep` (and the dilation probe before
//! them) send every request through one [`Target`], so a local cluster serves them all
//! and a served one is asked for each.

use anyhow::{anyhow, bail};
use topocomm_proto::control::{ClientRequest, ClientResponse, RunOutcome, RunRequest};

use crate::control::client::{self, Credentials};
use crate::control::local::LocalCluster;
use crate::control::request;

/// A cluster that runs requests.
pub enum Target {
    /// Node processes this command started; stopped by [`Target::shutdown`].
    Local(LocalCluster),
    /// A serving coordinator, asked once per request.
    Remote { address: String, credentials: Credentials },
}

impl Target {
    /// Runs `request` and gathers its outcome (every node's report).
    pub async fn execute(&self, request: RunRequest) -> anyhow::Result<RunOutcome> {
        match self {
            Target::Local(local) => local.coordinator.execute(request).await.map_err(|e| anyhow!(e)),
            Target::Remote { address, credentials } => {
                let patience = request::client_patience(&request.spec);
                match client::request(address, credentials, ClientRequest::Run(Box::new(request)), patience).await? {
                    ClientResponse::RunDone(outcome) => Ok(*outcome),
                    ClientResponse::Error(error) => Err(anyhow!(error)),
                    other => bail!("unexpected answer from the coordinator: {other:?}"),
                }
            }
        }
    }

    /// Whether every control and data link of this cluster is encrypted (`--encrypt`).
    pub fn encrypted(&self) -> bool {
        match self {
            Target::Local(local) => local.coordinator.encrypted(),
            Target::Remote { credentials, .. } => credentials.encrypted,
        }
    }

    /// Stops the node processes of a local cluster (a served one keeps serving).
    pub async fn shutdown(self) {
        if let Target::Local(local) = self {
            local.shutdown().await;
        }
    }
}
