// The background removals' titles as the pipeline's plan and progress name them (C++ background_title), for tests
// that name the default removal: the default itself comes from the schema. pipeline.test.js checks each title against
// the stage a plan of that removal names, so this table cannot drift from C++ unnoticed.
export const BACKGROUND_TITLES = Object.freeze({ vsharp: 'V-SHARP', pdf: 'PDF', lbv: 'LBV', ismv: 'iSMV', sharp: 'SHARP', resharp: 'RESHARP' });

/** The default background removal's title. schema: what tessera.schema() returns. */
export const backgroundTitle = (schema) => BACKGROUND_TITLES[schema.find((o) => o.name === 'background').default];

/** The same from a runtime (its schema). */
export const defaultBackgroundTitle = async (tessera) => backgroundTitle(await tessera.schema());
