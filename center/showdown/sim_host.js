// The simulator host: many Showdown battles (BattleStream of the pinned install) in one node process.
//
// Usage: node sim_host.js PATH/TO/pokemon-showdown
//
// It reads one JSON command per line on stdin and writes one JSON event per line on stdout; every
// battle is named by the id the caller gave it. Commands never carry raw simulator input: the host
// builds each line it writes to a battle itself, from checked fields, so that nothing a caller
// passes can become a `>eval` (or any other) command of the stream. A brought team is checked and
// cleaned by Showdown's validator first, as the server does; a team it rejects starts no battle.
//
//   {"op": "start", "id", "formatid", "seed", "players": {"p1": {"name", "team"?, "seed"?}, "p2": ...},
//    "openteamsheets"?}   (true: >show-openteamsheets at team preview, as the server writes it
//                          once both players accept Open Team Sheets)
//   {"op": "choose", "id", "side": "p1", "choice": "move 1"}
//   {"op": "forfeit", "id", "side": "p1"}        (>forcelose p1)
//   {"op": "tie", "id"}                          (>forcetie)
//   {"op": "tiebreak", "id"}                     (>tiebreak: Battle.tiebreak(), the turn cap's rule)
//   {"op": "destroy", "id"}                      (drop the battle, no event)
//
// Events:
//   {"type": "ready", "version"}                                 once, when the simulator is loaded
//   {"id", "type": "update", "p1": "...", "p2": "..."}   each side's lines of one update, joined
//                                                        by newlines ("" where it has none)
//   {"id", "type": "side", "side": "p1", "line": "|request|{...}"}           one side's own line
//   {"id", "type": "end", "winner", "turns", "input": [...]}     the battle ended; its input log
//   {"id", "type": "error", "message"}                           a command the battle refused
//   {"type": "error", "message"}                                 a line that is not a command
//
// Requests get an `rqid` (counting every request of the battle), as the server adds one.
//
// Events are written in batches: everything made while handling the commands of one read of
// stdin goes out in one write once they are done, not one write (and one wake-up of the reader)
// per event.
'use strict';

const path = require('path');
const readline = require('readline');

const pkg = process.argv[2];
if (!pkg) {
  process.stderr.write('usage: node sim_host.js PATH/TO/pokemon-showdown\n');
  process.exit(2);
}
const {BattleStream} = require(path.join(pkg, 'dist/sim/battle-stream'));
const {extractChannelMessages} = require(path.join(pkg, 'dist/sim/battle'));
const {Teams} = require(path.join(pkg, 'dist/sim/teams'));
const {Dex} = require(path.join(pkg, 'dist/sim/dex'));
const {TeamValidator} = require(path.join(pkg, 'dist/sim/team-validator'));
const version = require(path.join(pkg, 'package.json')).version;

const SIDES = new Set(['p1', 'p2']);
const FORMAT_ID = /^[a-z0-9]{1,80}$/;
const SEED = /^sodium,[0-9a-f]{1,64}$/;
const BATTLE_ID = /^[A-Za-z0-9_.:-]{1,100}$/;
// The choices the center writes (center/showdown/sim_battle.py's allow-list), and nothing else:
// never a newline, a '>' or a '|'.
// A doubles choice names one slot's choice, then the other's, by position.
const SLOT = '(?:move [1-4](?: terastallize)?(?: -?[12])?|switch [1-6]|pass)';
const CHOICE = new RegExp(
  '^(?:move [a-z0-9]{1,40}(?: terastallize)?|switch [^\\x00-\\x1f\\x7f>|]{1,60}|default|' +
    `team [1-9]{1,6}|${SLOT}, ${SLOT})$`,
);
const NAME = /^[^\x00-\x1f\x7f>|,]{1,18}$/;

const battles = new Map();

let pending = [];

function flush() {
  if (pending.length) {
    const out = pending.join('');
    pending = [];
    process.stdout.write(out);
  }
}

function emit(event) {
  // Queued and written by flush() once the battles have answered the commands just read (their
  // updates arrive in microtasks, all done before setImmediate runs).
  if (!pending.length) setImmediate(flush);
  pending.push(JSON.stringify(event) + '\n');
}

function check(ok, message) {
  if (!ok) throw new Error(message);
}

function write(battle, line) {
  // One write per command line, as the server does: each write is followed by the battle's
  // updates, so the output is cut into the same chunks on every run and on a replay.
  check(!line.slice(1).includes('\n'), 'a command line cannot contain a newline');
  battle.input.push(line);
  battle.stream.write(line);
}

function packTeam(team, formatid) {
  check(typeof team === 'string' && team.length <= 20000, 'a team must be a string');
  const sets = Teams.import(team);
  check(sets && sets.length, 'the team cannot be read');
  // As the server does before every battle: Showdown's validator checks the team and cleans it
  // (a nickname loses '|', ',', brackets and whitespace such as U+2028, which the simulator's
  // channel split would read as the end of a protocol line), and the cleaned team is played.
  // A format that deals its own teams has no validator for a brought one, and the simulator would
  // play it as given: refused (the server's validator refuses it too).
  check(!Dex.formats.get(formatid).team, `${formatid} deals its own teams: a team cannot be brought`);
  const problems = TeamValidator.get(formatid).validateTeam(sets);
  check(!problems || !problems.length, `Showdown rejects the team: ${(problems || []).join(' ')}`);
  return Teams.pack(sets);
}

function onChunk(id, battle, chunk) {
  const nl = chunk.indexOf('\n');
  const type = nl < 0 ? chunk : chunk.slice(0, nl);
  const data = nl < 0 ? '' : chunk.slice(nl + 1);
  if (type === 'update') {
    const channels = extractChannelMessages(data, [1, 2]);
    emit({id, type: 'update', p1: channels[1].join('\n'), p2: channels[2].join('\n')});
  } else if (type === 'sideupdate') {
    const at = data.indexOf('\n');
    const side = data.slice(0, at);
    let line = data.slice(at + 1);
    if (line.startsWith('|request|')) {
      // The request is Showdown's JSON.stringify of an object with keys and no rqid: the rqid is
      // spliced in as its last key, the same text as parsing it, adding the key and stringifying
      // again, without either.
      check(line.endsWith('}') && !line.endsWith('{}'), 'a request is not a JSON object');
      battle.rqid += 1;
      line = `${line.slice(0, -1)},"rqid":${battle.rqid}}`;
    }
    emit({id, type: 'side', side, line});
  } else if (type === 'end') {
    const log = JSON.parse(data);
    battles.delete(id);
    emit({id, type: 'end', winner: log.winner || '', turns: log.turns, input: battle.input});
  }
}

async function pump(id, battle) {
  // A command the simulator rejects is a recoverable stream error: report it, keep reading.
  for (;;) {
    try {
      for await (const chunk of battle.stream) {
        try {
          onChunk(id, battle, chunk);
        } catch (err) {
          emit({id, type: 'error', message: `host: ${err.message}`});
        }
      }
      return;
    } catch (err) {
      emit({id, type: 'error', message: String((err && err.message) || err)});
    }
  }
}

function start(command) {
  const {id, formatid, seed, players} = command;
  check(typeof id === 'string' && BATTLE_ID.test(id), 'bad battle id');
  check(!battles.has(id), `battle ${id} already exists`);
  check(typeof formatid === 'string' && FORMAT_ID.test(formatid), 'bad format id');
  check(typeof seed === 'string' && SEED.test(seed), 'a seed must be "sodium,<hex>"');
  check(players && typeof players === 'object', 'players are missing');
  const options = {};
  for (const side of SIDES) {
    const player = players[side];
    check(player && typeof player === 'object', `player ${side} is missing`);
    check(typeof player.name === 'string' && NAME.test(player.name), `bad name for ${side}`);
    const opts = {name: player.name};
    if (player.team) opts.team = packTeam(player.team, formatid);
    if (player.seed !== undefined && player.seed !== null) {
      check(typeof player.seed === 'string' && SEED.test(player.seed), `bad seed for ${side}`);
      opts.seed = player.seed;
    }
    options[side] = opts;
  }
  const battle = {stream: new BattleStream(), input: [], rqid: 0};
  battles.set(id, battle);
  void pump(id, battle);
  write(battle, `>start ${JSON.stringify({formatid, seed})}`);
  for (const side of SIDES) write(battle, `>player ${side} ${JSON.stringify(options[side])}`);
  if (command.openteamsheets === true) write(battle, '>show-openteamsheets');
}

function get(id) {
  const battle = battles.get(id);
  check(battle, `no battle ${id}`);
  return battle;
}

function side(command) {
  check(SIDES.has(command.side), 'side must be p1 or p2');
  return command.side;
}

function handle(command) {
  switch (command.op) {
  case 'start':
    start(command);
    break;
  case 'choose': {
    const battle = get(command.id);
    const who = side(command);
    check(typeof command.choice === 'string' && CHOICE.test(command.choice), 'bad choice');
    write(battle, `>${who} ${command.choice}`);
    break;
  }
  case 'forfeit':
    write(get(command.id), `>forcelose ${side(command)}`);
    break;
  case 'tie':
    write(get(command.id), '>forcetie');
    break;
  case 'tiebreak':
    write(get(command.id), '>tiebreak');
    break;
  case 'destroy': {
    const battle = battles.get(command.id);
    if (battle) {
      battles.delete(command.id);
      battle.stream.destroy();
    }
    break;
  }
  default:
    throw new Error(`unknown op ${JSON.stringify(command.op)}`);
  }
}

const input = readline.createInterface({input: process.stdin, crlfDelay: Infinity});
input.on('line', line => {
  let command;
  try {
    command = JSON.parse(line);
  } catch (err) {
    emit({type: 'error', message: `not JSON: ${err.message}`});
    return;
  }
  try {
    handle(command);
  } catch (err) {
    const id = command && typeof command.id === 'string' ? command.id : undefined;
    emit({id, type: 'error', message: String((err && err.message) || err)});
  }
});
// The owner closed our stdin: it is gone or done with us.
input.on('close', () => {
  flush();
  process.exit(0);
});

emit({type: 'ready', version});
