//! The one table registry: every table of the database, declared once, with its layout.
//!
//! Names and byte layouts follow the Otterscan V2 ("ots2") format (docs/format.md); deviations are
//! listed in docs/format.md. Integers are 8 bytes big-endian, addresses 20 raw bytes.

use super::codec::{
    AddressTotals, Attributes, Balance, BalancePrior, BlockNumber, ChunkKey, ContractInfo, Count, CounterDup,
    Creation, Holding, IdChunk, KeyCodec, Label, ListId, ListKey, MultiKey, MultiPrior, NonceAnchor,
    NonceRun, OwnerPrior, PackedIds, PairKey, Rank, RecentId, RecentKey, RecentSent, RowIdChunk, SentTx,
    StagedChunkKey, StagedHoldingKey, StagedOwnerKey, StateKey, Timestamp, TokenIdKey, TotalsDelta,
    UndoRecord, ValueCodec, WindowValue,
};
use alloy_primitives::{Address, U256};

use crate::txid::TxId;
use signet_libmdbx::DatabaseFlags;

/// How a table stores values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One value per key.
    Plain,
    /// Sorted duplicate values per key, of varying size.
    DupSort,
    /// Sorted duplicate values per key, all of one size (packed by MDBX, about half the bytes).
    DupFixed,
}

impl Layout {
    /// The MDBX flags that create a table of this layout.
    pub const fn flags(self) -> DatabaseFlags {
        match self {
            Self::Plain => DatabaseFlags::empty(),
            Self::DupSort => DatabaseFlags::DUP_SORT,
            Self::DupFixed => DatabaseFlags::DUP_SORT.union(DatabaseFlags::DUP_FIXED),
        }
    }
}

/// A table with sorted duplicate values per key (`DupSort` or `DupFixed`): only these take the
/// cursor's dup operations.
pub trait DupTable: Table {}

/// Declares `DupTable` for the tables whose layout keeps duplicates.
macro_rules! dup_table {
    (Plain, $name:ident) => {};
    (DupSort, $name:ident) => {
        impl DupTable for $name {}
    };
    (DupFixed, $name:ident) => {
        impl DupTable for $name {}
    };
}

/// A table with typed keys and values.
pub trait Table: 'static {
    /// Its entry in the registry.
    const ID: TableId;
    /// Key type, with an order-preserving codec.
    type Key: KeyCodec;
    /// Value (or dup value) type.
    type Value: ValueCodec;
}

macro_rules! tables {
    ($( $(#[$doc:meta])* $name:ident: $layout:ident, $key:ty => $value:ty; )*) => {
        /// Every table of the database.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum TableId {
            $( $(#[$doc])* $name, )*
        }

        impl TableId {
            /// All tables, in registry order.
            pub const ALL: &'static [TableId] = &[$(TableId::$name),*];

            /// The MDBX table name.
            pub const fn name(self) -> &'static str {
                match self { $(TableId::$name => stringify!($name),)* }
            }

            /// How the table stores values.
            pub const fn layout(self) -> Layout {
                match self { $(TableId::$name => Layout::$layout,)* }
            }

            /// Position in [`TableId::ALL`].
            pub const fn index(self) -> usize {
                self as usize
            }
        }

        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $name;

            impl Table for $name {
                const ID: TableId = TableId::$name;
                type Key = $key;
                type Value = $value;
            }

            dup_table!($layout, $name);
        )*
    };
}

tables! {
    /// Every contract, by deployment block. Key: block number (8). Dup: address (20), sorted by
    /// address bytes. No incarnation suffix (an Erigon-2 internal we do not have).
    OtsAllContracts: DupFixed, BlockNumber => Address;
    /// Cumulative contract count → block. Key: count up to and including the block (8).
    /// Value: block number (8). One row per block with at least one contract; the N-th contract
    /// is found by seeking the first key ≥ N.
    OtsAllContractsCounter: Plain, Count => BlockNumber;
    /// ERC20 tokens by deployment block; layout of `OtsAllContracts`.
    OtsERC20: DupFixed, BlockNumber => Address;
    /// Cumulative counter of `OtsERC20`; layout of `OtsAllContractsCounter`.
    OtsERC20Counter: Plain, Count => BlockNumber;
    /// ERC165 contracts by deployment block; layout of `OtsAllContracts`.
    OtsERC165: DupFixed, BlockNumber => Address;
    /// Cumulative counter of `OtsERC165`.
    OtsERC165Counter: Plain, Count => BlockNumber;
    /// ERC721 tokens by deployment block; layout of `OtsAllContracts`.
    OtsERC721: DupFixed, BlockNumber => Address;
    /// Cumulative counter of `OtsERC721`.
    OtsERC721Counter: Plain, Count => BlockNumber;
    /// ERC1155 tokens by deployment block; layout of `OtsAllContracts`.
    OtsERC1155: DupFixed, BlockNumber => Address;
    /// Cumulative counter of `OtsERC1155`.
    OtsERC1155Counter: Plain, Count => BlockNumber;
    /// EIP-1167 minimal proxies by deployment block; layout of `OtsAllContracts`.
    OtsERC1167: DupFixed, BlockNumber => Address;
    /// Cumulative counter of `OtsERC1167`.
    OtsERC1167Counter: Plain, Count => BlockNumber;
    /// ERC4626 vaults by deployment block; layout of `OtsAllContracts`.
    OtsERC4626: DupFixed, BlockNumber => Address;
    /// Cumulative counter of `OtsERC4626`.
    OtsERC4626Counter: Plain, Count => BlockNumber;
    /// Attributes of an address. Key: address (20). Value: 64-bit portable roaring bitmap with
    /// bits 0 ERC20, 1 ERC165, 2 ERC721, 3 ERC721 metadata, 4 ERC1155, 5 ERC1167, 6 ERC4626.
    /// A row exists only while at least one bit is set.
    OtsAddrAttributes: Plain, Address => Attributes;
    /// Transactions with an ERC20 Transfer from or to an address. Key: address (20) ‖ chunk id
    /// (8): the chunk's largest TxId, or `FF…FF` for the last chunk. Value: ascending TxIds, 8
    /// bytes each; every chunk but the last holds 244, the last 1–244 (up to 256 while the
    /// counter is in its 1-byte form).
    OtsERC20TransferIndex: Plain, ChunkKey => IdChunk;
    /// Counter of `OtsERC20TransferIndex`. Key: address (20). Dups: one 16-byte dup per chunk,
    /// cumulative count (8) ‖ chunk id (8), the last with chunk `FF…FF`; or a single 1-byte dup
    /// `total − 1` while the address has one chunk and at most 256 ids.
    OtsERC20TransferCounter: DupSort, Address => CounterDup;
    /// ERC721 transfer index; layout of `OtsERC20TransferIndex`.
    OtsERC721TransferIndex: Plain, ChunkKey => IdChunk;
    /// Counter of `OtsERC721TransferIndex`; layout of `OtsERC20TransferCounter`.
    OtsERC721TransferCounter: DupSort, Address => CounterDup;
    /// Withdrawals to an address; layout of `OtsERC20TransferIndex` with consensus-layer
    /// withdrawal indexes as ids.
    OtsWithdrawalsIndex: Plain, ChunkKey => IdChunk;
    /// Counter of `OtsWithdrawalsIndex`; layout of `OtsERC20TransferCounter`.
    OtsWithdrawalsCounter: DupSort, Address => CounterDup;
    /// Index of the last withdrawal in a block → that block. Key: withdrawal index (8). Value:
    /// block number (8). The block of withdrawal `i` is the value of the first key ≥ `i`.
    OtsWithdrawalIdx2Block: Plain, Count => BlockNumber;
    /// Blocks whose fee recipient is an address; layout of `OtsERC20TransferIndex` with block
    /// numbers as ids.
    OtsBlocksRewardedIndex: Plain, ChunkKey => IdChunk;
    /// Counter of `OtsBlocksRewardedIndex`; layout of `OtsERC20TransferCounter`.
    OtsBlocksRewardedCounter: DupSort, Address => CounterDup;
    /// ERC20 tokens an address ever sent or received. Key: holder (20). Dup: token (20) ‖ TxId
    /// of the first such transaction (8), sorted by token; exactly one dup per (holder, token).
    OtsERC20Holdings: DupFixed, Address => Holding;
    /// ERC721 tokens an address ever sent or received; layout of `OtsERC20Holdings`.
    OtsERC721Holdings: DupFixed, Address => Holding;
    /// ERC1155 transfer index (not part of ots2): transactions with a `TransferSingle` or
    /// `TransferBatch` of an ERC1155 token from or to the address (the operator is not
    /// indexed); layout of `OtsERC20TransferIndex`.
    OtsERC1155TransferIndex: Plain, ChunkKey => IdChunk;
    /// Counter of `OtsERC1155TransferIndex`; layout of `OtsERC20TransferCounter`.
    OtsERC1155TransferCounter: DupSort, Address => CounterDup;
    /// ERC1155 tokens an address ever sent or received (not part of ots2); layout of
    /// `OtsERC20Holdings`.
    OtsERC1155Holdings: DupFixed, Address => Holding;
    /// Internal-transaction index (not part of ots2): transactions with a frame below the top
    /// call that moves ether (a CALL with value), creates a contract (CREATE, CREATE2) or
    /// selfdestructs, with the address as its `from` or `to` (the created contract, the
    /// beneficiary), reverted frames included — the transactions `txlistinternal` of the
    /// address can list; layout of `OtsERC20TransferIndex`. Filled from call frames only: the
    /// state's `internal_txs_from` says from which TxId it holds every such transaction.
    OtsInternalTxIndex: Plain, ChunkKey => IdChunk;
    /// Counter of `OtsInternalTxIndex`; layout of `OtsERC20TransferCounter`.
    OtsInternalTxCounter: DupSort, Address => CounterDup;
    /// The token-list rows the transfer indexes do not count (not part of ots2): for each
    /// transaction of an address's ERC20, ERC721 or ERC1155 transfer index that makes other than
    /// one row of its Etherscan list, one id: TxId (52 bits) ‖ kind (2: 0 ERC20, 1 ERC721, 2
    /// ERC1155) ‖ code (10: the rows beyond the first, 1–1,022; 1,023 when there are none or more
    /// than 1,022). Keys and chunks as `OtsERC20TransferIndex`'s, a chunk's ids packed as gaps
    /// (`RowIdChunk`). The state's `transfer_rows_from` says from which TxId it holds them all.
    OtsTransferRowsIndex: Plain, ChunkKey => RowIdChunk;
    /// Counter of `OtsTransferRowsIndex`; layout of `OtsERC20TransferCounter`.
    OtsTransferRowsCounter: DupSort, Address => CounterDup;
    /// The transactions that move a token, for its own token lists (not part of ots2). Key:
    /// token (20) ‖ chunk id (8), as `OtsERC20TransferIndex`'s. Value: one id for each
    /// transaction with a transfer log of the token: TxId (52 bits) ‖ kind (2: 0 ERC20, 1 ERC721,
    /// 2 ERC1155, 3 two of them) ‖ code (10: the rows its list shows for the transaction, 0–1,022;
    /// 1,023 when more, or of two kinds), packed as `OtsTransferRowsIndex`'s (`RowIdChunk`). The
    /// state's `token_transfers_from` says from which TxId it holds them all.
    OtsTokenTransfersIndex: Plain, ChunkKey => RowIdChunk;
    /// Counter of `OtsTokenTransfersIndex`; layout of `OtsERC20TransferCounter`.
    OtsTokenTransfersCounter: DupSort, Address => CounterDup;
    /// The `txlistinternal` rows the internal-transaction index does not count (not part of
    /// ots2): for each transaction in which an address is a party of other than one frame that
    /// list shows, one id: TxId (52 bits) ‖ `00` ‖ code (10: the rows beyond the first, 1–1,022;
    /// 1,023 when more). As `OtsTransferRowsIndex` otherwise. The state's `internal_rows_from`
    /// says from which TxId it holds them all.
    OtsInternalRowsIndex: Plain, ChunkKey => RowIdChunk;
    /// Counter of `OtsInternalRowsIndex`; layout of `OtsERC20TransferCounter`.
    OtsInternalRowsCounter: DupSort, Address => CounterDup;
    /// The transactions in which an address moved a token, for its token lists of that token
    /// alone (`address` and `contractaddress`; not part of ots2). Key: the pair's key (20: the
    /// last 20 bytes of keccak256(party (20) ‖ token (20))) ‖ chunk id (8), as
    /// `OtsERC20TransferIndex`'s. Value: one id for each transaction with a transfer log of the
    /// token that the party sent or received: TxId (52 bits) ‖ kind (2, as
    /// `OtsTokenTransfersIndex`'s) ‖ code (10: the rows the pair's list shows for the
    /// transaction, 0–1,022; 1,023 when more, or of two kinds), packed as `RowIdChunk`. The
    /// state's `party_token_from` says from which TxId it holds them all.
    OtsPartyTokenIndex: Plain, ChunkKey => RowIdChunk;
    /// Counter of `OtsPartyTokenIndex`; layout of `OtsERC20TransferCounter`, keyed by the pair's
    /// key.
    OtsPartyTokenCounter: DupSort, Address => CounterDup;
    /// Balances from Transfer logs (ours). Key: token (20) ‖ holder (20). Value: balance (BE
    /// without leading zeros, 1–32): ERC20 amount, or the number of ERC721 ids held. No row for a
    /// zero balance, none for the zero address.
    OtsTokenBalances: Plain, PairKey => Balance;
    /// Holders of a token by balance (ours). Key: token (20). Dup: !balance (32) ‖ holder (20),
    /// so the largest balance comes first. One dup per non-zero balance.
    OtsTokenHolderRanks: DupFixed, Address => Rank;
    /// Number of holders with a non-zero balance (ours). Key: token (20). Value: count (8).
    OtsTokenHolderCounts: Plain, Address => Count;
    /// Owner of every ERC721 token id (ours). Key: token (20) ‖ id length (1) ‖ id (BE without
    /// leading zeros, 0–32), ordered as the ids are. Value: owner (20). No row for a burnt id.
    OtsERC721Owners: Plain, TokenIdKey => Address;
    /// The balances blocks in the reorg window changed, by block (ours): the window's part of
    /// `OtsTokenBalances`, whose rows (with the ranks and holder counts) are the state before
    /// the window's first block. Key: block (8). Dup: token (20) ‖ holder (20) ‖ balance
    /// before the block (32). Each names one dup of `OtsRecentBalances`; a block leaving the
    /// window settles them into the large tables, an unwind deletes them.
    OtsRecentBalancesByBlock: DupFixed, BlockNumber => BalancePrior;
    /// The ERC721 owners blocks in the reorg window changed, by block (ours); as
    /// `OtsRecentBalancesByBlock`, for `OtsERC721Owners` and `OtsRecentOwners`. Key: block (8).
    /// Dup: token (20) ‖ id (32, BE) ‖ owner before the block (20; the zero address for none).
    OtsRecentOwnersByBlock: DupFixed, BlockNumber => OwnerPrior;
    /// Token-wide balances as the reorg window's blocks left them (ours), for reads. Key:
    /// token (20) ‖ holder (20). Dup: block (8) ‖ balance after it (32; zero when it emptied
    /// the balance), sorted by block: the last dup is the balance now. One dup per row of
    /// `OtsRecentBalancesByBlock`.
    OtsRecentBalances: DupFixed, PairKey => WindowValue<U256>;
    /// How each block of the reorg window changed a token's holder count (ours), for reads: the
    /// count now is `OtsTokenHolderCounts`' plus these. Key: token (20). Dup: block (8) ‖
    /// holders gained less holders lost in it (8, two's complement), sorted by block; no dup
    /// where the block left the count as it was.
    OtsRecentHolderCounts: DupFixed, Address => WindowValue<i64>;
    /// The holders whose balance the reorg window's blocks changed, ranked by their balance now
    /// (ours), for reads: a token's ranking is `OtsTokenHolderRanks`' less these holders, merged
    /// with these. Key: token (20). Dup: !balance (32) ‖ holder (20), as `OtsTokenHolderRanks`;
    /// one dup per key of `OtsRecentBalances` whose last dup is not zero.
    OtsRecentHolderRanks: DupFixed, Address => Rank;
    /// ERC721 owners as the reorg window's blocks left them (ours), for reads. Key: as
    /// `OtsERC721Owners`. Dup: block (8) ‖ owner after it (20; the zero address once burnt).
    /// One dup per row of `OtsRecentOwnersByBlock`.
    OtsRecentOwners: DupFixed, TokenIdKey => WindowValue<Address>;
    /// ERC1155 balances from TransferSingle/TransferBatch logs (ours). Key: token (20) ‖
    /// holder (20) ‖ id length (1) ‖ id (BE without leading zeros, 0–32). Value: balance (BE
    /// without leading zeros, 1–32). No row for a zero balance, none for the zero
    /// address. A holder's total over all ids is its `OtsTokenBalances` row, which the holder
    /// count and ranking use.
    OtsERC1155Balances: Plain, MultiKey => Balance;
    /// The ERC1155 balances blocks in the reorg window changed, by block (ours); as
    /// `OtsRecentBalancesByBlock`, for `OtsERC1155Balances` and `OtsRecentMultiBalances`. Key:
    /// block (8). Dup: token (20) ‖ holder (20) ‖ id (32) ‖ balance before the block (32).
    OtsRecentMultiBalancesByBlock: DupFixed, BlockNumber => MultiPrior;
    /// ERC1155 balances as the reorg window's blocks left them (ours), for reads. Key: as
    /// `OtsERC1155Balances`. Dup: block (8) ‖ balance after it (32). One dup per row of
    /// `OtsRecentMultiBalancesByBlock`.
    OtsRecentMultiBalances: DupFixed, MultiKey => WindowValue<U256>;
    /// Contract metadata (not part of ots2, whose lists call the node per row). Key: contract
    /// (20). Dup: block whose classification wrote it (8) ‖ presence flags (1) ‖ optional
    /// decimals (1), asset (20), implementation (20), name and symbol (2-byte length ‖ UTF-8);
    /// see `codec::ContractInfo`. Dups sort by block; a reader merges them, newer fields winning,
    /// and an unwind drops the dups of unwound blocks.
    OtsContractInfo: DupSort, Address => ContractInfo;
    /// Contracts that emitted a Transfer-shaped log while unclassified and were re-probed then
    /// in vain (not part of ots2): they are never re-probed again. Key: contract (20). Value:
    /// block of that probe (8).
    OtsTransferProbes: Plain, Address => BlockNumber;
    /// Labels that classifiers (usually a user's own) gave addresses (not part of ots2). Key:
    /// address (20). Dup: block that gave it (8) ‖ label UTF-8 (1–64), sorted by block.
    OtsLabels: DupSort, Address => Label;
    /// Transactions an address appears in (not part of ots2): as sender, recipient, created
    /// contract, `from` or `to` of any call or create frame (reverted ones too), or address or
    /// beneficiary of a selfdestruct (without call frames: emitter of a log); those it sent are
    /// marked, for `ots_getTransactionBySenderAndNonce`. Key: address (20) ‖ the chunk's largest TxId (8).
    /// Value: varint count of the address's earlier ids ‖ varint count of those it sent ‖ varint
    /// count of this chunk's ids << 2 | sent mode (0 none, 1 all, 2 a bitmap follows) ‖ the
    /// bitmap (one bit an id, oldest first) ‖ the gaps between its ids newest first
    /// (`codec::PackedIds`), at most 1,000 bytes.
    OtsAppearances: Plain, ListKey => PackedIds;
    /// Where a sender's nonces skip (not part of ots2). Key: sender (20). Dup: position among its
    /// sent transactions (8) ‖ that transaction's nonce (8), sorted by position; one only where
    /// the nonce is not the previous one's plus one (the first: not 0).
    OtsNonceAnchors: DupFixed, Address => NonceAnchor;
    /// Who created a contract (not part of ots2). Key: contract (20). Dup: creating TxId (8) ‖
    /// the creating frame's `from` (20), sorted by TxId; a contract re-created at the same
    /// address (CREATE2 after a selfdestruct) has one dup per creation.
    OtsContractCreators: DupFixed, Address => Creation;
    /// When a contract's code was removed (ours): key contract (20), dup the TxId (8) of the
    /// transaction whose SELFDESTRUCT removed it, confirmed by the node's `eth_getCode` at that
    /// block. With `OtsContractCreators`, a contract's lifetimes: each creation starts one, a
    /// removal after it ends it.
    OtsCodeRemovals: DupFixed, Address => TxId;
    /// Every indexed block's time (ours), for finding a block by time (Etherscan's
    /// `getblocknobytime`) without the node. Key: block number (8). Value: the header's
    /// timestamp, Unix seconds (8). One row per block from genesis to the tip; an unwind drops
    /// the rows above the block it goes back to.
    OtsBlockTimes: Plain, BlockNumber => Timestamp;
    /// How many rows Etherscan's `txlistinternal` by block range shows up to each block (ours):
    /// frames below a transaction's top call that move ether, create or selfdestruct. Key: block
    /// number (8). Value: the rows of every block up to and including it since the table's first
    /// row (8); one row per block indexed with call frames that has such a frame. An unwind drops
    /// the rows above the block it goes back to.
    OtsInternalRowsByBlock: Plain, BlockNumber => Count;
    /// An address's totals (ours): wei received, sent, paid in fees and withdrawn, and
    /// transactions it was the top-level recipient of. Key: address (20). Value:
    /// `codec::AddressTotals` (a presence mask, then compact sums and a varint count), as of
    /// the blocks older than the reorg window (`OtsRecentTotals` holds the rest). No row for an
    /// address whose totals are all zero.
    OtsAddressTotals: Plain, Address => AddressTotals;
    /// What the reorg window's blocks added to the address totals (ours), not yet in
    /// `OtsAddressTotals`: reads add it, an unwind drops a block's rows, a block leaving the
    /// window moves its rows into `OtsAddressTotals`. Key: block (8). Dup: address (20) ‖ what
    /// the block added, encoded as `OtsAddressTotals` values.
    OtsRecentTotals: DupSort, BlockNumber => TotalsDelta;
    /// The reorg window's part of the address lists (ours): ids that blocks still in the
    /// window (those `OtsUndoJournal` holds) added to `OtsERC20TransferIndex`,
    /// `OtsERC721TransferIndex`, `OtsERC1155TransferIndex`, `OtsBlocksRewardedIndex`,
    /// `OtsWithdrawalsIndex`, `OtsInternalTxIndex`, `OtsTransferRowsIndex`, `OtsTokenTransfersIndex`, `OtsInternalRowsIndex`, `OtsPartyTokenIndex` and `OtsAppearances`. Key: block (8). Dup: list kind (1, the
    /// journal's row kind) ‖ address (20) ‖ id (8); every id larger than the address's ids in
    /// the list's own table. A list is its table's ids, then these; a block leaving the window
    /// moves its ids into the tables, and an unwind deletes the unwound blocks' rows here only
    /// (docs/architecture.md, "Invariants").
    OtsRecentIds: DupFixed, BlockNumber => RecentId;
    /// The reorg window's part of the sent marks and nonce anchors (ours): the transactions
    /// blocks still in the window hold. Key: block (8). Dup: sender (20) ‖ TxId (8) ‖ nonce (8);
    /// each TxId is among its sender's `OtsRecentIds` appearance ids. They move into
    /// `OtsAppearances` (as marks) and `OtsNonceAnchors` with their blocks.
    OtsRecentSent: DupFixed, BlockNumber => RecentSent;
    /// `OtsRecentIds` by list and address (ours), for reads: one seek finds an address's
    /// window ids. Key: list kind (1) ‖ address (20). Dup: id (8), ascending. Written, moved
    /// and deleted with `OtsRecentIds`, which holds exactly the same rows.
    OtsRecentIdsByAddress: DupFixed, RecentKey => ListId;
    /// `OtsRecentSent` by sender (ours), for reads. Key: sender (20). Dup: TxId (8) ‖ nonce (8),
    /// sorted by TxId. Holds exactly the rows of `OtsRecentSent`.
    OtsRecentSentBySender: DupFixed, Address => SentTx;
    /// Undo journal (not part of ots2). Key: block number (8). Value: block hash (32) ‖
    /// repeated [row kind (1) ‖ address (20)]: the rows the block wrote in large tables that its
    /// number alone does not find (holdings, creators, code removals, contract info, labels,
    /// probes; the lists keep theirs in `OtsRecentIds`). Kept for the newest blocks only (the
    /// reorg window); reorgs and `unwind` read it, and a block leaving it moves its window rows.
    OtsUndoJournal: Plain, BlockNumber => UndoRecord;
    /// The indexer's own state (not part of ots2). Key: ASCII name. Value: defined per name in
    /// `db::state`: chain id, genesis hash, format version, classifiers, db state, last block.
    OtsIndexerState: Plain, StateKey => Vec<u8>;
    /// The young level of `OtsERC20TransferIndex` (ours): ids a bulk stage of a catch-up appended after
    /// those of `OtsERC20TransferIndex`, kept apart until they reach an eighth of it and then folded into it
    /// whole, so that a stage rewrites a level of its own size rather than the whole list
    /// (docs/format.md, "Young levels"). Layout of `OtsERC20TransferIndex`; an address's ids here all follow
    /// its ids there. Empty once the catch-up has ended.
    OtsERC20TransferIndexYoung: Plain, ChunkKey => IdChunk;
    /// Counter of `OtsERC20TransferIndexYoung`; layout of `OtsERC20TransferCounter`.
    OtsERC20TransferCounterYoung: DupSort, Address => CounterDup;
    /// The young level of `OtsERC721TransferIndex`; as `OtsERC20TransferIndexYoung`.
    OtsERC721TransferIndexYoung: Plain, ChunkKey => IdChunk;
    /// Counter of `OtsERC721TransferIndexYoung`; layout of `OtsERC20TransferCounter`.
    OtsERC721TransferCounterYoung: DupSort, Address => CounterDup;
    /// The young level of `OtsERC1155TransferIndex`; as `OtsERC20TransferIndexYoung`.
    OtsERC1155TransferIndexYoung: Plain, ChunkKey => IdChunk;
    /// Counter of `OtsERC1155TransferIndexYoung`; layout of `OtsERC20TransferCounter`.
    OtsERC1155TransferCounterYoung: DupSort, Address => CounterDup;
    /// The young level of `OtsWithdrawalsIndex`; as `OtsERC20TransferIndexYoung`.
    OtsWithdrawalsIndexYoung: Plain, ChunkKey => IdChunk;
    /// Counter of `OtsWithdrawalsIndexYoung`; layout of `OtsERC20TransferCounter`.
    OtsWithdrawalsCounterYoung: DupSort, Address => CounterDup;
    /// The young level of `OtsBlocksRewardedIndex`; as `OtsERC20TransferIndexYoung`.
    OtsBlocksRewardedIndexYoung: Plain, ChunkKey => IdChunk;
    /// Counter of `OtsBlocksRewardedIndexYoung`; layout of `OtsERC20TransferCounter`.
    OtsBlocksRewardedCounterYoung: DupSort, Address => CounterDup;
    /// The young level of `OtsInternalTxIndex`; as `OtsERC20TransferIndexYoung`.
    OtsInternalTxIndexYoung: Plain, ChunkKey => IdChunk;
    /// Counter of `OtsInternalTxIndexYoung`; layout of `OtsERC20TransferCounter`.
    OtsInternalTxCounterYoung: DupSort, Address => CounterDup;
    /// The young level of `OtsTransferRowsIndex`; as `OtsERC20TransferIndexYoung`.
    OtsTransferRowsIndexYoung: Plain, ChunkKey => RowIdChunk;
    /// Counter of `OtsTransferRowsIndexYoung`; layout of `OtsERC20TransferCounter`.
    OtsTransferRowsCounterYoung: DupSort, Address => CounterDup;
    /// The young level of `OtsTokenTransfersIndex`; as `OtsERC20TransferIndexYoung`.
    OtsTokenTransfersIndexYoung: Plain, ChunkKey => RowIdChunk;
    /// Counter of `OtsTokenTransfersIndexYoung`; layout of `OtsERC20TransferCounter`.
    OtsTokenTransfersCounterYoung: DupSort, Address => CounterDup;
    /// The young level of `OtsInternalRowsIndex`; as `OtsERC20TransferIndexYoung`.
    OtsInternalRowsIndexYoung: Plain, ChunkKey => RowIdChunk;
    /// Counter of `OtsInternalRowsIndexYoung`; layout of `OtsERC20TransferCounter`.
    OtsInternalRowsCounterYoung: DupSort, Address => CounterDup;
    /// The young level of `OtsPartyTokenIndex`; as `OtsERC20TransferIndexYoung`.
    OtsPartyTokenIndexYoung: Plain, ChunkKey => RowIdChunk;
    /// Counter of `OtsPartyTokenIndexYoung`; layout of `OtsERC20TransferCounter`.
    OtsPartyTokenCounterYoung: DupSort, Address => CounterDup;
    /// The young level of `OtsAppearances` (ours): appearances a bulk stage of a catch-up appended
    /// after those of `OtsAppearances`, kept apart and folded in as `OtsERC20TransferIndexYoung` is.
    /// Layout of `OtsAppearances`, but a list's counts of earlier ids (and of those it sent) count
    /// from its first id here, leaving out its ids there, which all come before. Empty once the
    /// catch-up has ended.
    OtsAppearancesYoung: Plain, ListKey => PackedIds;
    /// What the bulk stages of a catch-up added to the address totals (ours), one segment a
    /// stage, not yet in `OtsAddressTotals`: reads add every segment, the catch-up's end (or the
    /// first write of a batch after it) sums them into `OtsAddressTotals` in one pass and empties
    /// the table. Key: the stage's newest block with totals (8). Dup: address (20) ‖ what the
    /// stage added, encoded as `OtsAddressTotals` values (`OtsRecentTotals`' layout). Empty once
    /// the catch-up has ended.
    OtsStagedTotals: DupSort, BlockNumber => TotalsDelta;
    /// What the bulk stages of a catch-up appended to `OtsERC20TransferIndex` (ours), one segment
    /// a stage, written at the table's end (docs/format.md, "Staged segments"): reads take an
    /// address's ids from every segment after the main table's, the catch-up's end (or the first
    /// write of a batch after it) folds them into the main table in one pass and empties this
    /// one. Key: the stage's newest block (8) ‖ address (20) ‖ the chunk's largest id (8). Value:
    /// at most 244 of the address's ids of that stage, ascending, encoded as the main table's
    /// chunks. Empty once the catch-up has ended.
    OtsERC20TransferIndexStaged: Plain, StagedChunkKey => IdChunk;
    /// The staged segments of `OtsERC721TransferIndex`; as `OtsERC20TransferIndexStaged`.
    OtsERC721TransferIndexStaged: Plain, StagedChunkKey => IdChunk;
    /// The staged segments of `OtsERC1155TransferIndex`; as `OtsERC20TransferIndexStaged`.
    OtsERC1155TransferIndexStaged: Plain, StagedChunkKey => IdChunk;
    /// The staged segments of `OtsWithdrawalsIndex`; as `OtsERC20TransferIndexStaged`.
    OtsWithdrawalsIndexStaged: Plain, StagedChunkKey => IdChunk;
    /// The staged segments of `OtsBlocksRewardedIndex`; as `OtsERC20TransferIndexStaged`.
    OtsBlocksRewardedIndexStaged: Plain, StagedChunkKey => IdChunk;
    /// The staged segments of `OtsInternalTxIndex`; as `OtsERC20TransferIndexStaged`.
    OtsInternalTxIndexStaged: Plain, StagedChunkKey => IdChunk;
    /// The staged segments of `OtsTransferRowsIndex`; as `OtsERC20TransferIndexStaged`.
    OtsTransferRowsIndexStaged: Plain, StagedChunkKey => RowIdChunk;
    /// The staged segments of `OtsTokenTransfersIndex`; as `OtsERC20TransferIndexStaged`.
    OtsTokenTransfersIndexStaged: Plain, StagedChunkKey => RowIdChunk;
    /// The staged segments of `OtsInternalRowsIndex`; as `OtsERC20TransferIndexStaged`.
    OtsInternalRowsIndexStaged: Plain, StagedChunkKey => RowIdChunk;
    /// The staged segments of `OtsPartyTokenIndex`; as `OtsERC20TransferIndexStaged`.
    OtsPartyTokenIndexStaged: Plain, StagedChunkKey => RowIdChunk;
    /// What the bulk stages of a catch-up appended to the appearance lists (ours, format 21), one
    /// segment a stage, written at the table's end and folded into `OtsAppearances` as
    /// `OtsERC20TransferIndexStaged` is (docs/format.md, "Staged segments of the appearance
    /// lists"). Key: the stage's newest block (8) ‖ address (20) ‖ the chunk's largest TxId (8).
    /// Value: the chunk, as `OtsAppearances` packs it, but with the counts of earlier ids (and of
    /// those sent) counting from the address's first id in the segment. Empty once the catch-up
    /// has ended.
    OtsAppearancesStaged: Plain, StagedChunkKey => PackedIds;
    /// The carried nonces of the senders of `OtsAppearancesStaged`'s segments (ours, format 21).
    /// Key: the segment (8). Dup: sender (20) ‖ position among its sent transactions of the
    /// segment (8) ‖ the nonce that one carries (8), sorted by sender, then position: one at
    /// position 0 for each sender, and one wherever a nonce is not the previous one's plus one.
    /// The fold writes the `OtsNonceAnchors` they imply. Empty once the catch-up has ended.
    OtsNonceRunsStaged: DupFixed, BlockNumber => NonceRun;
    /// What the bulk stages of a catch-up added to the holdings tables (ours, format 22), one
    /// segment a stage of the pairs neither the holdings tables nor an earlier segment hold,
    /// appended at the table's end (docs/format.md, "Staged holdings"). Eight segments of a tier
    /// merge into one of the next tier. Reads take a holder's tokens from
    /// the main table and every segment; the catch-up's end (or the first write of a batch after
    /// it) folds them into the main tables and empties this one. Key: the newest block of its
    /// stages (8) ‖ tier (1) ‖ kind (1, 5 for ERC20, 6 for ERC721, 10 for ERC1155) ‖ holder
    /// (20). Dup: token (20) ‖ first TxId (8), as the main tables'. Empty once the catch-up has
    /// ended.
    OtsHoldingsStaged: DupFixed, StagedHoldingKey => Holding;
    /// The ERC721 owners the bulk stages of a catch-up set (ours, format 23), one segment a
    /// stage of every (token, id) it moved, with its owner at the stage's end, appended at the
    /// table's end (docs/format.md, "Staged owners"). Sixteen segments of a tier merge into one
    /// of the next tier, the newest owner of each id kept. A read takes an id's owner from the
    /// newest segment holding it, else `OtsERC721Owners`; the catch-up's end (or the first
    /// write of a batch after it) folds them into `OtsERC721Owners` and empties this one. Key:
    /// the newest block of its stages (8) ‖ tier (1) ‖ token (20) ‖ id length (1) ‖ id (BE
    /// without leading zeros, 0–32). Value: owner (20; the zero address once burnt). Empty once
    /// the catch-up has ended.
    OtsOwnersStaged: Plain, StagedOwnerKey => Address;
}

/// A dupsorted table whose dups sort by a leading part of their bytes, the sub-key: a seek
/// names a sub-key, never raw bytes, and lands on the first dup at or after it.
pub trait DupSubKey: DupTable {
    /// The part of a dup that orders it.
    type SubKey: PartialEq + Copy;
    /// A dup's sub-key.
    fn sub_key(value: &Self::Value) -> Self::SubKey;
    /// The smallest dup bytes with sub-key `sub`: its encoding, padded with zeros to a whole
    /// value where the table's dups are of fixed size (MDBX seeks those with whole values).
    fn seek_bytes(sub: &Self::SubKey) -> Vec<u8>;
}

/// Declares the sub-key of dupsorted tables: `Table, Table… by SubKey: |value| sub, |sub| bytes`.
macro_rules! sub_keys {
    ($( $($table:ident),+ by $sub:ty: |$v:ident| $of:expr, |$s:ident| $bytes:expr; )*) => {
        $($(
            impl DupSubKey for $table {
                type SubKey = $sub;
                fn sub_key($v: &Self::Value) -> $sub {
                    $of
                }
                fn seek_bytes($s: &$sub) -> Vec<u8> {
                    $bytes
                }
            }
        )+)*
    };
}

sub_keys! {
    // Holdings sort by token, then the first TxId.
    OtsERC20Holdings, OtsERC721Holdings, OtsERC1155Holdings, OtsHoldingsStaged by Address:
        |v| v.token, |s| Holding { token: *s, first: TxId(0) }.encode_value();
    // A block's totals deltas sort by address.
    OtsRecentTotals, OtsStagedTotals by Address: |v| v.address, |s| s.as_slice().to_vec();
    // A segment's nonce runs sort by sender, then position.
    OtsNonceRunsStaged by Address: |v| v.sender, |s| NonceRun { sender: *s, position: 0, nonce: 0 }.encode_value();
    // A key's window values sort by block.
    OtsRecentBalances by u64: |v| v.block, |s| WindowValue { block: *s, value: U256::ZERO }.encode_value();
    OtsRecentHolderCounts by u64: |v| v.block, |s| WindowValue { block: *s, value: 0i64 }.encode_value();
    OtsRecentMultiBalances by u64: |v| v.block, |s| WindowValue { block: *s, value: U256::ZERO }.encode_value();
    OtsRecentOwners by u64: |v| v.block, |s| WindowValue { block: *s, value: Address::ZERO }.encode_value();
    // A ranking's dups sort by the whole rank (largest balance first, then holder).
    OtsTokenHolderRanks, OtsRecentHolderRanks by Rank: |v| *v, |s| s.encode_value();
    // An address-index counter's dups sort by the cumulative count (the 1-byte form is alone).
    OtsERC20TransferCounter, OtsERC721TransferCounter, OtsERC1155TransferCounter, OtsWithdrawalsCounter,
    OtsBlocksRewardedCounter, OtsInternalTxCounter, OtsTransferRowsCounter, OtsTokenTransfersCounter,
    OtsInternalRowsCounter, OtsPartyTokenCounter, OtsERC20TransferCounterYoung, OtsERC721TransferCounterYoung,
    OtsERC1155TransferCounterYoung, OtsWithdrawalsCounterYoung, OtsBlocksRewardedCounterYoung,
    OtsInternalTxCounterYoung, OtsTransferRowsCounterYoung, OtsTokenTransfersCounterYoung,
    OtsInternalRowsCounterYoung, OtsPartyTokenCounterYoung by u64: |v| v.cumulative(), |s| s.to_be_bytes().to_vec();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_ots_prefixed() {
        let mut names: Vec<_> = TableId::ALL.iter().map(|t| t.name()).collect();
        assert!(names.iter().all(|n| n.starts_with("Ots")));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TableId::ALL.len());
    }

    #[test]
    fn registry_holds_every_ots2_table() {
        // The ots2 format: 7 match tables + 7 counters, attributes, 4 index/counter pairs,
        // Idx2Block, 2 holdings tables; plus our ERC1155 index, counter and holdings, our
        // internal-transaction index and counter, the transfer rows, token transfers, internal rows
        // and party-token indexes and counters, the 11
        // balance tables (3 of them the window's values by key), contract info, transfer probes, labels, the 3 appearance tables, the 2
        // totals tables, code removals, block times and internal rows by block, the window's list ids and sent transactions
        // (each by block and by address), undo journal and internal state; and the young levels of
        // the 10 address indexes with their counters and of the appearance lists; the address
        // totals' staged segments; the address indexes' staged segments; the appearance lists'
        // staged segments with their senders' nonce runs; the holdings' staged segments; the ERC721
        // owners' staged segments.
        assert_eq!(
            TableId::ALL.len(),
            7 * 2
                + 1
                + 4 * 2
                + 1
                + 2
                + 3
                + 2
                + 4 * 2
                + 13
                + 3
                + 2
                + 1
                + 2
                + 9
                + 10 * 2
                + 1
                + 1
                + 10
                + 2
                + 1
                + 1
        );
        for (i, t) in TableId::ALL.iter().enumerate() {
            assert_eq!(t.index(), i);
        }
        assert_eq!(TableId::OtsERC20TransferCounter.layout(), Layout::DupSort);
        assert_eq!(TableId::OtsERC20.layout(), Layout::DupFixed);
        assert_eq!(TableId::OtsAddrAttributes.layout(), Layout::Plain);
    }

    /// A dup's sub-key seek bytes are the start of its own bytes (zeros after, for fixed-size
    /// dups) and sort at or below them: a seek by its sub-key lands on it or before it.
    fn seeks_land_at_or_before<T: DupSubKey>(values: &[T::Value]) {
        for v in values {
            let bytes = v.encode_value();
            let seek = T::seek_bytes(&T::sub_key(v));
            assert!(seek <= bytes, "{}: {seek:?} > {bytes:?}", T::ID.name());
            let shared = seek.iter().zip(&bytes).take_while(|(a, b)| a == b).count();
            assert!(seek[shared..].iter().all(|&b| b == 0), "{}: {seek:?} vs {bytes:?}", T::ID.name());
            if T::ID.layout() == Layout::DupFixed {
                assert_eq!(seek.len(), bytes.len(), "{}: whole values", T::ID.name());
            }
        }
    }

    #[test]
    fn sub_keys_are_the_leading_bytes_of_their_dups() {
        use crate::db::codec::{AddressTotals, CounterDup, Holding, TotalsDelta, WindowValue};
        let (a, b) = (Address::repeat_byte(0xa1), Address::repeat_byte(0xb2));
        let holdings = [Holding { token: a, first: TxId(7) }, Holding { token: b, first: TxId(u64::MAX) }];
        seeks_land_at_or_before::<OtsERC20Holdings>(&holdings);
        seeks_land_at_or_before::<OtsERC721Holdings>(&holdings);
        seeks_land_at_or_before::<OtsERC1155Holdings>(&holdings);
        seeks_land_at_or_before::<OtsRecentTotals>(&[TotalsDelta {
            address: a,
            added: AddressTotals::default(),
        }]);
        let values = [
            WindowValue { block: 9, value: U256::from(5) },
            WindowValue { block: 1 << 40, value: U256::MAX },
        ];
        seeks_land_at_or_before::<OtsRecentBalances>(&values);
        seeks_land_at_or_before::<OtsRecentMultiBalances>(&values);
        seeks_land_at_or_before::<OtsRecentOwners>(&[WindowValue { block: 3, value: b }]);
        let counters = [
            CounterDup::Regular { cumulative: 512, chunk: 3 },
            CounterDup::Regular { cumulative: 1, chunk: 0 },
        ];
        seeks_land_at_or_before::<OtsERC20TransferCounter>(&counters);
        seeks_land_at_or_before::<OtsBlocksRewardedCounter>(&counters);
        let ranks = [Rank { balance: U256::from(3), holder: a }, Rank { balance: U256::MAX, holder: b }];
        seeks_land_at_or_before::<OtsTokenHolderRanks>(&ranks);
        seeks_land_at_or_before::<OtsRecentHolderRanks>(&ranks);
    }

    /// Ranks order as their bytes do: the larger balance first, then the smaller holder.
    #[test]
    fn ranks_order_as_their_bytes() {
        let (a, b) = (Address::repeat_byte(0xa1), Address::repeat_byte(0xb2));
        let mut ranks = vec![
            Rank { balance: U256::from(3), holder: b },
            Rank { balance: U256::from(3), holder: a },
            Rank { balance: U256::from(300), holder: b },
            Rank { balance: U256::from(1), holder: a },
            Rank { balance: U256::MAX, holder: b },
        ];
        let mut by_bytes = ranks.clone();
        by_bytes.sort_by_key(ValueCodec::encode_value);
        ranks.sort();
        assert_eq!(ranks, by_bytes);
        assert_eq!(ranks[0].balance, U256::MAX);
    }
}
