// A base class whose constructor returns its argument: a subclass's private-field initializer then adds that private
// field to any existing object (an event, a row) without a WeakMap and invisibly to keys, Equal, Hash and JSON.

/**
 * Extend it to stamp a private field onto an existing object: `new Slot(target).#field = value`.
 *
 * @since 0.1.0
 * @category models
 */
export class Stamped {
  constructor(target: object) {
    return target
  }
}
