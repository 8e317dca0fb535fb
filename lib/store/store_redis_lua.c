/* SPDX-License-Identifier: MIT */
/*
 * The scripts the Redis store runs (store_redis_internal.h): each does one
 * step of a claim, its end, or a task's record atomically in Redis.
 */
#include "lib/store/store_redis_internal.h"

/* Claims the keys of one loop turn's claims, each for itself: 3 keys
 * (record, lease, uid's set) and 4 args (record, token, idempotent,
 * member) each, after ARGV[1..3] (lease ms, record ms, the bound).
 * Answers one reply per claim: {0} claimed, {2} claimed from a dead
 * holder (idempotent tools only), {1, record, lease alive}. New records
 * join their uid's set (scored in microseconds by Redis's clock). Past
 * ARGV[3] records, the uid's oldest ended ones (keys: the record's key
 * less its member, then the member) go, as the memory store drops a
 * uid's oldest outcomes: running ones stay. They go in batches (the uid
 * is taken down to the bound less a 64th of it, 127 at most) so that a
 * uid at its bound does not pay a trim on every claim; only each
 * record's first byte is read (Lua hashes every byte of a string it is
 * given, and an outcome may be large). The sets are kept once per call
 * of the script, however many claims it carries. */
static const char CLAIM_LUA[] =
	"local out, sets, order = {}, {}, {}\n"
	"for i = 0, #KEYS / 3 - 1 do\n"
	"  local rec, lease, set, a = KEYS[i * 3 + 1], KEYS[i * 3 + 2], KEYS[i * 3 + 3], 3 + i * 4\n"
	"  if redis.call('SET', rec, ARGV[a + 1], 'NX', 'PX', ARGV[2]) then\n"
	"    redis.call('SET', lease, ARGV[a + 2], 'PX', ARGV[1])\n"
	"    local s = sets[set]\n"
	"    if not s then\n"
	"      s = {pre = string.sub(rec, 1, #rec - #ARGV[a + 4]), n = 0}\n"
	"      sets[set] = s\n"
	"      order[#order + 1] = set\n"
	"    end\n"
	"    s.n = s.n + 1\n"
	"    s[s.n] = ARGV[a + 4]\n"
	"    out[i + 1] = {0}\n"
	"  else\n"
	"    local v = redis.call('GET', rec)\n"
	"    local alive = redis.call('EXISTS', lease)\n"
	"    if alive == 0 and ARGV[a + 3] == '1' and string.sub(v, 1, 1) == 'R' and\n"
	"       string.sub(v, 34) == string.sub(ARGV[a + 1], 34) then\n"
	"      redis.call('SET', rec, ARGV[a + 1], 'PX', ARGV[2])\n"
	"      redis.call('SET', lease, ARGV[a + 2], 'PX', ARGV[1])\n"
	"      out[i + 1] = {2}\n"
	"    else\n"
	"      out[i + 1] = {1, v, alive}\n"
	"    end\n"
	"  end\n"
	"end\n"
	"if #order == 0 then return out end\n"
	"local t = redis.call('TIME')\n"
	"t = t[1] * 1000000 + t[2]\n"
	"local max = tonumber(ARGV[3])\n"
	"for _, set in ipairs(order) do\n"
	"  local s, z = sets[set], {}\n"
	"  for j = 1, s.n do z[2 * j - 1] = t; z[2 * j] = s[j] end\n"
	"  redis.call('ZADD', set, unpack(z))\n"
	"  if redis.call('PTTL', set) < tonumber(ARGV[2]) then redis.call('PEXPIRE', set, ARGV[2]) end\n"
	"  local n = redis.call('ZCARD', set)\n"
	"  if n > max then\n"
	"    local want = n - max + math.min(math.floor(max / 64), 127)\n"
	"    local old = redis.call('ZRANGE', set, 0, want + 15)\n"
	"    local recs, gone = {}, {}\n"
	"    for i = 1, #old do\n"
	"      if #gone >= want then break end\n"
	"      local st = redis.call('GETRANGE', s.pre .. old[i], 0, 0)\n"
	"      if st ~= 'R' then\n"
	"        if st ~= '' then recs[#recs + 1] = s.pre .. old[i] end\n"
	"        gone[#gone + 1] = old[i]\n"
	"      end\n"
	"    end\n"
	"    for i = 1, #recs, 1000 do redis.call('DEL', unpack(recs, i, math.min(i + 999, #recs))) end\n"
	"    for i = 1, #gone, 1000 do redis.call('ZREM', set, unpack(gone, i, math.min(i + 999, #gone))) end\n"
	"  end\n"
	"end\n"
	"return out\n";

/* Renews the holder's lease (and the record's life) while the record is
 * still the holder's (a lease that ran out while Redis was away comes
 * back): 1, or 0 when the record is gone or another's. */
static const char RENEW_LUA[] =
	"if redis.call('GETRANGE', KEYS[1], 0, 32) == 'R' .. ARGV[1] then\n"
	"  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])\n"
	"  redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
	"  return 1\n"
	"end\n"
	"return 0\n";

/* Ends holders' claims, those a loop turn ended together: 4 keys and 3
 * args each, (record, lease, uid's set, outcome; token, keep, member).
 * For each, with keep '1', the outcome record written beforehand under
 * its own key (with its TTL) takes the record's place; otherwise the key
 * is free again and leaves the uid's set; then the joiners are told. A
 * record that is no longer the holder's stays (the outcome goes), except
 * that an outcome written back after an outage (keep '2') also takes the
 * place of no record at all (Redis lost it, or never heard of the claim)
 * and joins the uid's set. While the record is the holder's, so is its
 * lease (only a takeover, which rewrites the record, makes another).
 * Returns how many ended. Only a record's head enters Lua: Lua hashes
 * every byte of a string it is given. */
static const char END_LUA[] =
	"local n = 0\n"
	"for i = 0, #ARGV / 3 - 1 do\n"
	"  local k, a = i * 4, i * 3\n"
	"  local head = redis.call('GETRANGE', KEYS[k + 1], 0, 32)\n"
	"  if head == '' and ARGV[a + 2] == '2' and redis.call('EXISTS', KEYS[k + 4]) == 1 then\n"
	"    redis.call('RENAME', KEYS[k + 4], KEYS[k + 1])\n"
	"    local t = redis.call('TIME')\n"
	"    redis.call('ZADD', KEYS[k + 3], t[1] * 1000000 + t[2], ARGV[a + 3])\n"
	"    if redis.call('PTTL', KEYS[k + 3]) < redis.call('PTTL', KEYS[k + 1]) then\n"
	"      redis.call('PEXPIRE', KEYS[k + 3], redis.call('PTTL', KEYS[k + 1]))\n"
	"    end\n"
	"    redis.call('PUBLISH', KEYS[k + 1], 'E')\n"
	"    n = n + 1\n"
	"  elseif head ~= 'R' .. ARGV[a + 1] then\n"
	"    redis.call('DEL', KEYS[k + 4])\n"
	"  else\n"
	"    if ARGV[a + 2] ~= '0' and redis.call('EXISTS', KEYS[k + 4]) == 1 then\n"
	"      redis.call('RENAME', KEYS[k + 4], KEYS[k + 1])\n"
	"    else\n"
	"      redis.call('DEL', KEYS[k + 1])\n"
	"      redis.call('ZREM', KEYS[k + 3], ARGV[a + 3])\n"
	"    end\n"
	"    redis.call('DEL', KEYS[k + 2])\n"
	"    redis.call('PUBLISH', KEYS[k + 1], 'E')\n"
	"    n = n + 1\n"
	"  end\n"
	"end\n"
	"return n\n";

/* Lists tasks above a position: {order, meta, order, meta, ...}. */
static const char LIST_LUA[] =
	"local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf', 'WITHSCORES',\n"
	"                       'LIMIT', 0, tonumber(ARGV[2]))\n"
	"local out = {}\n"
	"for i = 1, #ids, 2 do\n"
	"  local m = redis.call('GET', ARGV[3] .. ids[i])\n"
	"  if m then table.insert(out, ids[i + 1]); table.insert(out, m)\n"
	"  else redis.call('ZREM', KEYS[1], ids[i]) end\n"
	"end\n"
	"return out\n";

/* Saves a task: {1}; {2, record} when the stored one is cancelled (it
 * stays); {0} when a new task (ARGV[7] '1') would take the uid past
 * ARGV[5] tasks, counted after dropping members whose record expired. */
static const char TASK_PUT_LUA[] =
	"local old = redis.call('GET', KEYS[1])\n"
	"if old and string.sub(old, 1, #ARGV[6]) == ARGV[6] then return {2, old} end\n"
	"if not old and ARGV[7] == '1' then\n"
	"  local n, max = redis.call('ZCARD', KEYS[2]), tonumber(ARGV[5])\n"
	"  if n >= max then\n"
	"    for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do\n"
	"      if redis.call('EXISTS', ARGV[8] .. id) == 0 then redis.call('ZREM', KEYS[2], id); n = n - 1 end\n"
	"    end\n"
	"    if n >= max then return {0} end\n"
	"  end\n"
	"end\n"
	"redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
	"redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[4])\n"
	"if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end\n"
	"return {1}\n";

/* Cancels a task from any daemon: replaces record ARGV[1] by ARGV[2] and
 * tells the daemons (channel KEYS[2]): {2}; {1, record} when another
 * record is there; {0} when none is. */
static const char TASK_SWAP_LUA[] =
	"local old = redis.call('GET', KEYS[1])\n"
	"if not old then return {0} end\n"
	"if old ~= ARGV[1] then return {1, old} end\n"
	"redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])\n"
	"redis.call('PUBLISH', KEYS[2], ARGV[4])\n"
	"return {2}\n";

const char *const rs_script_text[N_SCRIPTS] = {
	[S_CLAIM] = CLAIM_LUA, [S_RENEW] = RENEW_LUA, [S_END] = END_LUA,
	[S_LIST] = LIST_LUA, [S_TASK_PUT] = TASK_PUT_LUA, [S_TASK_SWAP] = TASK_SWAP_LUA,
};
