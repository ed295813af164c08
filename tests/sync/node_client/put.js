// A Seafowl-style sync client written without pyarrow: @grpc/grpc-js calls Flight's DoPut and the
// Arrow JavaScript library encodes the batches.
// Usage: node put.js DESCRIPTORS HOST:PORT DO_PUT_PATH STEPS_JSON
// DESCRIPTORS is a FileDescriptorSet holding Flight.proto's and the sync messages, DO_PUT_PATH the
// gRPC method (both written by the test from the spec); each step {path, origin, seq, rows:
// [[old_id, new_id, v], ...]} is one put, answered by one JSON line: the DataSyncResponse, or
// {"error": "CODE: details"}.
'use strict';
const fs = require('fs');
const grpc = require('@grpc/grpc-js');
const protobuf = require('protobufjs');
const descriptor = require('protobufjs/ext/descriptor');
const arrow = require('apache-arrow');

const [descriptorsFile, address, doPutPath, stepsJson] = process.argv.slice(2);
const root = protobuf.Root.fromDescriptor(descriptor.FileDescriptorSet.decode(fs.readFileSync(descriptorsFile)));
const FlightData = root.lookupType('arrow.flight.protocol.FlightData');
const PutResult = root.lookupType('arrow.flight.protocol.PutResult');
const Command = root.lookupType('clade.sync.DataSyncCommand');
const Response = root.lookupType('clade.sync.DataSyncResponse');
const COMMAND_TYPE_URL = 'DataSyncCommand';
const ROLE = root.lookupEnum('clade.sync.ColumnRole').values;
const CMD = root.lookupEnum('arrow.flight.protocol.FlightDescriptor.DescriptorType').values.CMD;

/** The Arrow IPC stream of `table`, cut into the (header, body) of each message, as Flight sends them. */
function ipcMessages(table) {
  const bytes = arrow.tableToIPC(table, 'stream');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const messages = [];
  for (let pos = 0; pos + 8 <= bytes.length;) {
    const length = view.getInt32(pos + 4, true);  // after the 0xFFFFFFFF continuation
    if (length === 0) break;  // end of stream
    const header = bytes.subarray(pos + 8, pos + 8 + length);
    const bodyLength = Number(arrow.Message.decode(header).bodyLength);
    messages.push({ header, body: bytes.subarray(pos + 8 + length, pos + 8 + length + bodyLength) });
    pos += 8 + length + bodyLength;
  }
  return messages;
}

function int64s(values) {
  return arrow.vectorFromArray(values.map(v => (v === null ? null : BigInt(v))), new arrow.Int64());
}

function put(client, step) {
  const table = arrow.tableFromArrays({
    old_id: int64s(step.rows.map(r => r[0])),
    new_id: int64s(step.rows.map(r => r[1])),
    v: arrow.vectorFromArray(step.rows.map(r => r[2]), new arrow.Utf8()),
  });
  const command = {
    path: step.path, origin: step.origin,
    column_descriptors: [{ role: ROLE.OLD_PK, name: 'id' }, { role: ROLE.NEW_PK, name: 'id' }, { role: ROLE.VALUE, name: 'v' }],
  };
  if (step.seq !== null) command.sequence_number = step.seq;
  const any = root.lookupType('google.protobuf.Any').encode(
    { type_url: COMMAND_TYPE_URL, value: Command.encode(Command.create(command)).finish() }).finish();
  return new Promise((resolve) => {
    const call = client.makeBidiStreamRequest(doPutPath, (m) => Buffer.from(FlightData.encode(m).finish()),
                                              (b) => PutResult.decode(b), new grpc.Metadata(),
                                              { deadline: Date.now() + 60000 });
    let answer = null;
    call.on('data', (result) => {
      answer = Response.toObject(Response.decode(result.app_metadata), { longs: Number, defaults: true });
    });
    call.on('error', (e) => resolve({ error: `${grpc.status[e.code]}: ${e.details}` }));
    call.on('end', () => resolve(answer));
    ipcMessages(table).forEach((m, i) => call.write({
      flight_descriptor: i === 0 ? { type: CMD, cmd: any } : null, data_header: m.header, data_body: m.body,
    }));
    call.end();
  });
}

(async () => {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  for (const step of JSON.parse(stepsJson)) {
    console.log(JSON.stringify(await put(client, step)));
  }
  client.close();
})();
