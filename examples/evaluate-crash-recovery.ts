// Enable safe-boundary resume (optional): the flag a host's automatic continuation reads; this read-only check ignores it
process.env['MAKA_RUNTIME_SAFE_BOUNDARY_RESUME'] = '1';

import { RuntimeEventStore, RecoveryResolver } from 'runtime-resume/promise';

async function evaluateCrashRecovery(workspacePath: string): Promise<string> {
  const store = await RuntimeEventStore.open(workspacePath);
  const resolver = new RecoveryResolver(store);
  
  // Returns 'safe_replay' | 'blocked' | 'completed' | 'indeterminate' | 'corruption'
  const plan = await resolver.computeResumePlan();
  return plan;
}

// A typed error (WorkspaceNotFound, WorkspaceAmbiguous, StoreReadFailed, ...) as one line: its tag and its message
const oneLine = (error: unknown): string =>
  typeof error === 'object' && error !== null && '_tag' in error && 'message' in error
    ? `${String(error._tag)}: ${String(error.message)}`
    : String(error);

// CLI integration example
(async () => {
  const workspace = process.argv[2] || '/path/to/workspace';
  let plan: string;
  try {
    plan = await evaluateCrashRecovery(workspace);
  } catch (error) {
    console.error(`❌ Recovery failed: ${oneLine(error)}`);
    process.exitCode = 2;
    return;
  }
  
  switch (plan) {
    case 'safe_replay':
      console.log('✅ Crash recovery: safe to resume automatically');
      // `npx runtime-resume resume --plan <workspace>` shows how the turn continues (the Effect API: ContinuationExecutor)
      break;
    case 'blocked':
      console.warn('⚠️ Crash recovery: manual intervention required');
      process.exitCode = 1;
      break;
    case 'completed':
      console.log('Turn already completed, no recovery needed');
      break;
    default:
      console.error(`❌ Recovery failed: ${plan}`);
      process.exitCode = 2;
  }
})();
