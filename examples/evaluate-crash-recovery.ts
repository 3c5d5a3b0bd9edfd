// Enable safe-boundary resume (optional)
process.env.MAKA_RUNTIME_SAFE_BOUNDARY_RESUME = '1';

import { RuntimeEventStore, RecoveryResolver } from 'runtime-resume/promise';

async function evaluateCrashRecovery(workspacePath: string): Promise<string> {
  const store = await RuntimeEventStore.open(workspacePath);
  const resolver = new RecoveryResolver(store);
  
  // Returns 'safe_replay' | 'blocked' | 'completed' | 'indeterminate' | 'corruption'
  const plan = await resolver.computeResumePlan();
  return plan;
}

// CLI integration example
(async () => {
  const workspace = process.argv[2] || '/path/to/workspace';
  const plan = await evaluateCrashRecovery(workspace);
  
  switch (plan) {
    case 'safe_replay':
      console.log('✅ Crash recovery: safe to resume automatically');
      // RuntimeHost.resumeTurn(workspace) replays model turn
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
