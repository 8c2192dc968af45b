//! Etherscan's HTTP API (`/api?module=…&action=…`, and `/v2/api` with `chainid`) on the
//! JSON-RPC port, for the wallets, scripts and client libraries that speak it: a tower layer in
//! front of the JSON-RPC server takes those two paths and passes every other request on.
//! docs/etherscan.md lists the actions served and where they differ from Etherscan's.

mod account;
mod block;
mod contract;
pub mod envelope;
mod gas;
mod history;
mod internal;
mod internal_ids;
pub mod keys;
mod lists;
mod logs;
pub mod marks;
pub mod marks_file;
mod movement_count;
pub mod params;
mod proxy;
mod token;
mod token_moves;
mod transaction;
mod txlist;
mod unserved;
mod walk;

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use http::{header, HeaderValue, Method};
use http_body_util::BodyExt;
use jsonrpsee::server::{HttpBody, HttpRequest, HttpResponse};
use tower::{Layer, Service};

use self::{
    envelope::{reasons, Answer},
    params::Params,
};
use super::{
    tx_cache::standings, BlockSummary, Materializer, ProxyPolicy, RpcContext, TransactionWithReceipt,
};
use crate::{
    db::{state, DbError, ReadTxn},
    decode::TokenKind,
    txid::TxId,
};

/// Default of `--etherscan-max-offset`: the most rows one page of a list may ask for.
pub const DEFAULT_MAX_OFFSET: u64 = 10_000;

/// Default of `--etherscan-key-rate`: calls a second per key, Etherscan's free plan's.
pub const DEFAULT_KEY_RATE: u32 = 5;

/// What the actions share: the index, the node, the page cap, what may go to the node.
#[derive(Debug, Clone)]
pub struct Etherscan {
    ctx: RpcContext,
    max_offset: u64,
    policy: ProxyPolicy,
    pages: Materializer,
    keys: Option<Arc<keys::ApiKeys>>,
    marks: Arc<marks::WalkMarks>,
}

/// Which of the two paths a call came by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `/api`: the chain is the node's.
    V1,
    /// `/v2/api`: `chainid` must name the node's chain.
    V2,
}

fn version_of(path: &str) -> Option<Version> {
    match path.trim_end_matches('/') {
        "/api" => Some(Version::V1),
        "/v2/api" => Some(Version::V2),
        _ => None,
    }
}

impl Etherscan {
    /// Serves `ctx`, pages of at most `max_offset` rows; the proxy actions go to the node as
    /// `policy` lets JSON-RPC calls go.
    pub fn new(ctx: RpcContext, max_offset: u64, policy: ProxyPolicy) -> Self {
        let pages = Materializer::new(ctx.node.clone(), ctx.tx_cache.clone());
        Self { ctx, max_offset, policy, pages, keys: None, marks: Arc::default() }
    }

    /// Admits only calls with one of `keys` in `apikey`, `rate` a second each (0: no limit);
    /// no keys admits every call.
    #[must_use]
    pub fn with_keys(mut self, keys: &[String], rate: u32) -> Self {
        self.keys = keys::ApiKeys::new(keys, rate).map(Arc::new);
        self
    }

    /// Counts its walks into `marks` (kept in a file across restarts) instead of its own.
    #[must_use]
    pub fn with_marks(mut self, marks: Arc<marks::WalkMarks>) -> Self {
        self.marks = marks;
        self
    }

    /// The transactions `ids` with their receipts and their blocks' summaries, through the
    /// server's transaction cache: one batch for what it lacks.
    async fn transactions(
        &self,
        ids: &[TxId],
    ) -> Result<(std::collections::BTreeMap<String, BlockSummary>, Vec<TransactionWithReceipt>), Answer> {
        let (standings, tip) = self.read(|t| Ok((standings(t, ids)?, state::read_tip(t)?)))?;
        self.pages
            .transactions(ids, &standings, tip)
            .await
            .map_err(|e| Answer::refuse(format!("Error! {}", e.message())))
    }

    /// `f` over a snapshot of the index; a failure becomes a refusal that says so.
    fn read<T>(&self, f: impl FnOnce(&ReadTxn) -> Result<T, DbError>) -> Result<T, Answer> {
        let txn = self.ctx.db.begin_read().map_err(|e| unreadable(&e))?;
        f(&txn).map_err(|e| unreadable(&e))
    }

    /// The chain this server indexes: the database's, else the node's.
    async fn chain_id(&self) -> Option<u64> {
        let stored = self.ctx.db.begin_read().ok().and_then(|txn| state::read_state(&txn).ok());
        if let Some(chain) = stored.and_then(|s| s.chain) {
            return Some(chain.chain_id);
        }
        self.ctx.node.chain_identity().await.ok().map(|c| c.chain_id)
    }

    /// The answer to one call.
    pub async fn answer(&self, version: Version, params: &Params) -> Answer {
        if let Some(keys) = &self.keys {
            // Names match in any case: the npm etherscan-api spells it `apiKey`.
            let key = params.get("apikey");
            if let Err(refusal) = keys.admit(key, std::time::Instant::now()) {
                return refusal;
            }
        }
        if version == Version::V2 {
            let asked = params.get("chainid").and_then(|c| c.parse::<u64>().ok());
            if asked.is_none() || asked != self.chain_id().await {
                return Answer::refuse(reasons::CHAIN_ID);
            }
        }
        let Some(module) = params.get("module") else { return Answer::refuse(reasons::MODULE) };
        let action = params.get("action").unwrap_or_default();
        match (module, action) {
            ("account", "balance") => account::balance(self, params).await,
            ("account", "balancemulti") => account::balance_multi(self, params).await,
            ("account", "tokenbalance") => token::token_balance(self, params),
            ("account", "addresstokenbalance") => token::address_token_balances(self, params),
            ("account", "addresstokennftinventory") => token::nft_inventory(self, params),
            ("account", "balancehistory") => history::balance(self, params).await,
            ("account", "tokenbalancehistory") => history::token_balance(self, params).await,
            ("stats", "tokensupplyhistory") => history::token_supply(self, params).await,
            ("account", "getminedblocks") => lists::mined_blocks(self, params).await,
            ("account", "txsBeaconWithdrawal") => lists::beacon_withdrawals(self, params).await,
            ("account", "txlistinternal") => internal::internal_list(self, params).await,
            ("account", "txlist") => txlist::tx_list(self, params).await,
            ("account", "tokentx") => txlist::token_list(self, params, TokenKind::Erc20).await,
            ("account", "tokennfttx") => txlist::token_list(self, params, TokenKind::Erc721).await,
            ("account", "token1155tx") => txlist::token_list(self, params, TokenKind::Erc1155).await,
            ("token", "tokeninfo") => token::info(self, params).await,
            ("contract", "getcontractcreation") => contract::creations(self, params).await,
            ("transaction", "getstatus") => transaction::status(self, params).await,
            ("block", "getblockreward") => block::reward(self, params).await,
            ("block", "getblockcountdown") => block::countdown(self, params).await,
            ("block", "getblocknobytime") => block::by_time(self, params),
            ("logs", "getLogs") => logs::get_logs(self, params).await,
            ("token", "tokenholderlist") => token::holder_list(self, params),
            ("token", "tokenholdercount") => token::holder_count_of(self, params),
            ("token" | "stats", "tokensupply") => token::supply(self, params).await,
            ("contract", "getabi") => contract::abi(params),
            ("contract", "getsourcecode") => contract::source_code(params),
            ("transaction", "gettxreceiptstatus") => transaction::receipt_status(self, params).await,
            ("gastracker", "gasoracle") => gas::oracle(self).await,
            ("gastracker", "gasestimate") => gas::estimate(self, params).await,
            ("proxy", action) if proxy::serves(action) => {
                Answer::Bare(proxy::answer(self, action, params).await)
            }
            (
                "account" | "token" | "stats" | "contract" | "transaction" | "block" | "logs" | "proxy"
                | "gastracker",
                _,
            ) => Answer::refuse(unserved::refusal(module, action).unwrap_or_else(|| reasons::ACTION.into())),
            _ => Answer::refuse(reasons::MODULE),
        }
    }
}

fn unreadable(e: &DbError) -> Answer {
    tracing::warn!(target: "ots::rpc::etherscan", error = %e, "the index could not be read");
    Answer::refuse(format!("Error! The index could not be read: {e}"))
}

/// The layer: put it inside the body-size and CORS layers, so that `/api` gets both.
#[derive(Debug, Clone)]
pub struct EtherscanLayer {
    api: Arc<Etherscan>,
}

impl EtherscanLayer {
    /// Serves `api` on `/api` and `/v2/api`.
    pub fn new(api: Etherscan) -> Self {
        Self { api: Arc::new(api) }
    }
}

impl<S> Layer<S> for EtherscanLayer {
    type Service = EtherscanService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        EtherscanService { inner, api: Arc::clone(&self.api) }
    }
}

/// The service of [`EtherscanLayer`].
#[derive(Debug, Clone)]
pub struct EtherscanService<S> {
    inner: S,
    api: Arc<Etherscan>,
}

fn json_response(answer: Answer) -> HttpResponse {
    let mut response = HttpResponse::new(HttpBody::from(answer.into_body()));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

impl<S> Service<HttpRequest> for EtherscanService<S>
where
    S: Service<HttpRequest, Response = HttpResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = HttpResponse;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: HttpRequest) -> Self::Future {
        let Some(version) = version_of(request.uri().path()) else {
            return Box::pin(self.inner.call(request));
        };
        let api = Arc::clone(&self.api);
        Box::pin(async move {
            let query = request.uri().query().unwrap_or_default().as_bytes().to_vec();
            let body = if request.method() == Method::POST {
                match request.into_body().collect().await {
                    Ok(body) => body.to_bytes().to_vec(),
                    Err(_) => {
                        return Ok(json_response(Answer::refuse("Error! The request body could not be read")))
                    }
                }
            } else {
                Vec::new()
            };
            let params = Params::parse([query.as_slice(), body.as_slice()]);
            let answer = api.answer(version, &params).await;
            Ok(json_response(answer))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_paths_are_taken_and_nothing_else() {
        assert_eq!(version_of("/api"), Some(Version::V1));
        assert_eq!(version_of("/api/"), Some(Version::V1));
        assert_eq!(version_of("/v2/api"), Some(Version::V2));
        assert_eq!(version_of("/"), None);
        assert_eq!(version_of("/apis"), None);
    }
}
