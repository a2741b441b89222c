package io.medallion.delta;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.util.Iterator;

import io.delta.storage.S3SingleDriverLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;

/**
 * Delta's S3 log store, with each new commit written as a conditional put (If-None-Match: *)
 * by S3A. Delta's own store checks that a commit's file is absent and then writes it, so a
 * writer paused between the two (a GC pause, a stopped machine) overwrites the commit another
 * writer made meanwhile; here the store itself refuses the second write, and Delta sees the
 * FileAlreadyExistsException it resolves as a conflict. Reads and listings are Delta's.
 */
public class ConditionalPutLogStore extends S3SingleDriverLogStore {
    private static final String CONDITIONAL = "fs.option.create.conditional.overwrite";
    // What S3A throws for a 412 (named, not imported: compiled against Hadoop's client API,
    // whichever hadoop-aws JAR the session has)
    private static final String REFUSED = "org.apache.hadoop.fs.s3a.RemoteFileChangedException";

    public ConditionalPutLogStore(Configuration conf) {
        super(conf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration conf)
            throws IOException {
        if (overwrite) {
            super.write(path, actions, true, conf);
            return;
        }
        try (FSDataOutputStream out = (FSDataOutputStream) path.getFileSystem(conf)
                .createFile(path).overwrite(true).must(CONDITIONAL, true).build()) {
            writeLines(out, actions);
        } catch (IOException failed) {
            if (failed.getClass().getName().equals(REFUSED)) {  // the commit is another's
                throw new FileAlreadyExistsException(path.toString());
            }
            throw failed;
        }
    }

    private static void writeLines(OutputStream out, Iterator<String> actions) throws IOException {
        while (actions.hasNext()) {
            out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
        }
    }
}
